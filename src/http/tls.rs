//! TLS for every connection of a run: the raw client, the bursts and the ordinary client.
//!
//! One [`Trust`] is built per run from the user's TLS settings (`--cacert`, `--cert`/`--key`,
//! `--insecure`) and shared by all three clients through the run's
//! [`super::connection::Connector`], so a request never trusts a server the next one would
//! refuse, and two runs in one process never see each other's settings. The raw client speaks
//! HTTP/1.1 byte for byte, so it offers ALPN `http/1.1` only and a server can never pick h2 under
//! it; the HTTP/2 burst ([`super::h2burst`]) and the ordinary client offer `h2` first and learn
//! from the server's pick.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::crypto::{
    verify_tls12_signature, verify_tls13_signature, CryptoProvider,
};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio_rustls::rustls::{
    self, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_rustls::TlsConnector;

use super::error::HttpError;

/// The user's TLS settings, as files (flags or the target file's `[tls]` table).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// PEM certificates to trust besides the public and system roots (a private CA).
    pub cacert: Option<PathBuf>,
    /// PEM certificate chain presented to servers that ask for one (mutual TLS).
    pub cert: Option<PathBuf>,
    /// PEM private key of [`TlsOptions::cert`]; the certificate file itself when absent.
    pub key: Option<PathBuf>,
    /// Accept any server certificate. The handshake signature is still checked, so the
    /// connection is encrypted, but nobody vouches for whom it reaches.
    pub insecure: bool,
}

/// Which protocols a handshake offers in ALPN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Alpn {
    /// `http/1.1` alone: the raw client and the HTTP/1.1 burst write HTTP/1.1 bytes whatever
    /// the server would prefer.
    Http1,
    /// `h2`, then `http/1.1`: the server's pick decides between the single-packet and the
    /// last-byte burst.
    H2First,
}

/// A run's TLS client configurations, built once from its [`TlsOptions`]: one per [`Alpn`]
/// offer, otherwise identical.
#[derive(Debug)]
pub(crate) struct Trust {
    http1: Arc<ClientConfig>,
    h2_first: Arc<ClientConfig>,
    insecure: bool,
}

impl Trust {
    /// Reads the files `opts` names and builds the configurations. Errors name the file and
    /// what was wrong with it.
    pub(crate) fn new(opts: &TlsOptions) -> anyhow::Result<Trust> {
        if opts.key.is_some() && opts.cert.is_none() {
            anyhow::bail!("--key needs --cert (the certificate it belongs to)");
        }
        let extra_roots = match &opts.cacert {
            Some(path) => read_certs(path).context("--cacert")?,
            None => Vec::new(),
        };
        let identity = match &opts.cert {
            Some(cert) => {
                let chain = read_certs(cert).context("--cert")?;
                let key_path = opts.key.as_deref().unwrap_or(cert);
                if let Some(version) = x509_version(&chain[0]).filter(|v| *v < 3) {
                    anyhow::bail!("{}", not_v3(cert, key_path, version));
                }
                let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| {
                    anyhow::anyhow!("--key: no PEM private key in {}: {e}", key_path.display())
                })?;
                Some((chain, key))
            }
            None => None,
        };
        let mut http1 = client_config(&extra_roots, identity, opts.insecure)?;
        let mut h2_first = http1.clone();
        http1.alpn_protocols = vec![b"http/1.1".to_vec()];
        h2_first.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Trust {
            http1: Arc::new(http1),
            h2_first: Arc::new(h2_first),
            insecure: opts.insecure,
        })
    }

    /// The configuration offering `h2` then `http/1.1`, for the ordinary client.
    pub(crate) fn h2_first(&self) -> ClientConfig {
        self.h2_first.as_ref().clone()
    }

    /// Whether server certificates go unverified (`--insecure`), for the run's header and
    /// reports.
    pub(crate) fn insecure(&self) -> bool {
        self.insecure
    }

    /// Runs the TLS handshake for `host` over an open TCP stream, offering `alpn`; the flag says
    /// whether the server picked `h2`. Errors are [`HttpError::Tls`], which read "TLS handshake
    /// failed: …" so a report says which layer broke.
    pub(crate) async fn handshake(
        &self,
        tcp: TcpStream,
        host: &str,
        alpn: Alpn,
    ) -> Result<(TlsStream<TcpStream>, bool), HttpError> {
        let config = match alpn {
            Alpn::Http1 => &self.http1,
            Alpn::H2First => &self.h2_first,
        };
        let name = ServerName::try_from(super::net::unbracketed(host))
            .map_err(|e| HttpError::Tls(format!("invalid server name {host:?}: {e}")))?
            .to_owned();
        let tls = TlsConnector::from(config.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| HttpError::Tls(e.to_string()))?;
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        Ok((tls, h2))
    }
}

/// Why a client certificate older than X.509 v3 cannot be used, and the openssl lines that
/// reissue it with the same key. rustls (through webpki) parses the certificate to check it
/// against the key and accepts only v3, but reports a v1 certificate as a key mismatch
/// ("UnsupportedCertVersion"), which sends the user looking for the wrong problem.
fn not_v3(cert: &Path, key: &Path, version: u8) -> String {
    let shell = |p: &Path| {
        let p = p.display().to_string();
        if p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+".contains(&b))
        {
            p
        } else {
            format!("'{}'", p.replace('\'', "'\\''"))
        }
    };
    let (cert, key) = (shell(cert), shell(key));
    format!(
        "--cert: {cert} is an X.509 v{version} certificate, and rustls, the TLS library here, \
         accepts only v3 (`openssl x509 -req` makes v1 unless it is given extensions). Reissue \
         it as v3 with the same key, signed by the CA that signed it (ca.pem, ca-key.pem): \
         openssl x509 -x509toreq -in {cert} -signkey {key} -out client.csr && \
         echo basicConstraints=CA:FALSE > v3.ext && \
         openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
         -days 365 -extfile v3.ext -out client-v3.pem"
    )
}

/// The X.509 version of a DER certificate, from the head of its TBSCertificate: the explicit
/// `[0] version` field, which v1 certificates leave out (RFC 5280 §4.1). `None` when the DER
/// does not start like a certificate; rustls then says what is wrong with it.
fn x509_version(der: &[u8]) -> Option<u8> {
    let certificate = der_contents(der, 0x30)?;
    let tbs = der_contents(certificate, 0x30)?;
    if tbs.first() != Some(&0xA0) {
        return Some(1);
    }
    match der_contents(der_contents(tbs, 0xA0)?, 0x02)? {
        [v] if *v < 3 => Some(v + 1),
        _ => None,
    }
}

/// The contents of the DER element at the start of `input`, if it has tag `tag`.
fn der_contents(input: &[u8], tag: u8) -> Option<&[u8]> {
    let (&first, rest) = input.split_first()?;
    if first != tag {
        return None;
    }
    let (&len, rest) = rest.split_first()?;
    let (len, rest) = if len < 0x80 {
        (usize::from(len), rest)
    } else {
        let n = usize::from(len & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let (bytes, rest) = rest.split_at(n);
        (
            bytes.iter().fold(0, |acc, b| acc << 8 | usize::from(*b)),
            rest,
        )
    };
    rest.get(..len)
}

fn read_certs(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let pem = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .with_context(|| format!("{} is not valid PEM", path.display()))?;
    if certs.is_empty() {
        anyhow::bail!("no PEM certificate in {}", path.display());
    }
    Ok(certs)
}

/// The operating system's trusted certificates, as curl trusts them: an internal CA installed
/// under `/usr/local/share/ca-certificates` (or in the macOS or Windows store) reaches a run
/// without `--cacert`. `SSL_CERT_FILE` and `SSL_CERT_DIR` replace the system's locations, as
/// they do for OpenSSL; a file they name that cannot be read is the user's error and says so,
/// while a machine without a system store simply adds nothing.
fn system_roots() -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let found = rustls_native_certs::load_native_certs();
    let named = ["SSL_CERT_FILE", "SSL_CERT_DIR"]
        .into_iter()
        .filter(|var| std::env::var_os(var).is_some())
        .collect::<Vec<_>>();
    if let (Some(error), false) = (found.errors.first(), named.is_empty()) {
        anyhow::bail!("{}: {error}", named.join(" / "));
    }
    Ok(found.certs)
}

/// A configuration trusting the public roots, the system's and `extra_roots` (or, `insecure`,
/// anything),
/// presenting `identity` to servers that ask for a client certificate; no ALPN yet.
fn client_config(
    extra_roots: &[CertificateDer<'static>],
    identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    insecure: bool,
) -> anyhow::Result<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("choosing TLS versions")?;
    let verified = if insecure {
        versions
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
    } else {
        let mut roots = RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        roots.add_parsable_certificates(system_roots()?);
        for cert in extra_roots {
            roots
                .add(cert.clone())
                .context("adding a trusted certificate")?;
        }
        versions.with_root_certificates(roots)
    };
    match identity {
        Some((chain, key)) => verified
            .with_client_auth_cert(chain, key)
            .context("the client certificate and key do not belong together"),
        None => Ok(verified.with_no_client_auth()),
    }
}

/// `--insecure`: accepts any certificate chain, but still checks that the server holds the key
/// of the certificate it showed (the handshake signature), as curl -k does.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_read_from_the_certificate() {
        let v1 = include_bytes!("../../tests/data/tls/client-v1.pem");
        let v1 = CertificateDer::from_pem_slice(v1).unwrap();
        assert_eq!(x509_version(&v1), Some(1));
        let key = rcgen::KeyPair::generate().unwrap();
        let v3 = rcgen::CertificateParams::new(vec!["client".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        assert_eq!(x509_version(v3.der()), Some(3));
        assert_eq!(x509_version(b"not DER"), None);
        assert_eq!(x509_version(&[0x30, 0x82, 0xff]), None, "cut short");
    }

    #[test]
    fn the_reissue_lines_can_be_pasted() {
        let text = not_v3(Path::new("my certs/it's.pem"), Path::new("/k/key.pem"), 1);
        assert!(text.contains("X.509 v1"), "{text}");
        assert!(
            text.contains(r"-in 'my certs/it'\''s.pem' -signkey /k/key.pem "),
            "{text}"
        );
    }
}
