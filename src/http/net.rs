//! How connections reach the target: fixed addresses (`--resolve`) and the proxy (`--proxy`,
//! or `HTTPS_PROXY` / `HTTP_PROXY` / `NO_PROXY` from the environment).
//!
//! The raw client and both burst engines go through a proxy with a CONNECT tunnel, for `http`
//! targets too: a forwarding proxy re-parses and normalises a request, which would undo what
//! the key-syntax probes write on purpose, while a tunnel carries the bytes unchanged. The
//! ordinary client (reqwest) asks [`Route::proxy_for`] too, so every request of a run takes the
//! same route. Like TLS (see [`super::tls`]), the route is a property of the run: one [`Route`]
//! per run, held by its [`super::connection::Connector`].

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use anyhow::{bail, Context};
use base64::Engine as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::error::HttpError;
use crate::redact::mask_url;

/// The user's route settings, as given (flags or the target file's `proxy` and `resolve`).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct NetOptions {
    /// `HOST:PORT:ADDR` entries: connections to HOST:PORT go to ADDR, without DNS.
    pub resolve: Vec<String>,
    /// A proxy for every connection (`http://[user:pass@]host:port`); overrides the
    /// environment's.
    pub proxy: Option<String>,
    /// The environment's proxy variables ([`PROXY_VARIABLES`]) that were set, as `(name,
    /// value)`, read when the target was assembled (see [`NetOptions::proxy_environment`]);
    /// empty when the environment does not apply (the in-process reference server is never
    /// behind a proxy). Kept as values so building a run's route reads nothing from the process.
    pub proxy_env: Vec<(String, String)>,
}

/// Proxy URLs with their credentials masked ([`crate::redact::mask_url`]).
impl std::fmt::Debug for NetOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env: Vec<(&str, String)> = self
            .proxy_env
            .iter()
            .map(|(name, value)| (name.as_str(), mask_url(value)))
            .collect();
        f.debug_struct("NetOptions")
            .field("resolve", &self.resolve)
            .field("proxy", &self.proxy.as_deref().map(mask_url))
            .field("proxy_env", &env)
            .finish()
    }
}

/// The environment variables a route is read from, as curl reads them: the lower-case spelling
/// first.
pub const PROXY_VARIABLES: [&str; 8] = [
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
];

impl NetOptions {
    /// The [`PROXY_VARIABLES`] that `env` sets, for [`NetOptions::proxy_env`].
    pub fn proxy_environment(env: &dyn Fn(&str) -> Option<String>) -> Vec<(String, String)> {
        PROXY_VARIABLES
            .iter()
            .filter_map(|name| env(name).map(|value| (name.to_string(), value)))
            .collect()
    }
}

/// One `--resolve` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolve {
    pub host: String,
    pub port: u16,
    pub addr: IpAddr,
}

impl FromStr for Resolve {
    type Err = String;

    /// `HOST:PORT:ADDR`, as curl writes it; an IPv6 ADDR may be bracketed.
    fn from_str(s: &str) -> Result<Self, String> {
        let usage = || {
            format!("--resolve {s:?}: expected HOST:PORT:ADDR, e.g. api.example.com:443:10.0.0.7")
        };
        let mut parts = s.splitn(3, ':');
        let (Some(host), Some(port), Some(addr)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(usage());
        };
        let port = port.parse().map_err(|_| usage())?;
        let addr = addr
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .map_err(|_| format!("--resolve {s:?}: {addr:?} is not an IP address"))?;
        if host.is_empty() {
            return Err(usage());
        }
        Ok(Resolve {
            host: host.to_ascii_lowercase(),
            port,
            addr,
        })
    }
}

/// A proxy and where it was configured.
#[derive(Clone)]
struct Proxy {
    url: url::Url,
    /// `--proxy`, `HTTPS_PROXY`, …: named in the run's header.
    from: String,
}

/// The proxy as reports show it, without its credentials.
impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("url", &shown(&self.url))
            .field("from", &self.from)
            .finish()
    }
}

/// How a run's connections reach their hosts: fixed addresses, the proxies and the hosts that
/// bypass them.
#[derive(Debug)]
pub(crate) struct Route {
    resolve: Vec<Resolve>,
    explicit: Option<Proxy>,
    http_env: Option<Proxy>,
    https_env: Option<Proxy>,
    no_proxy: Vec<String>,
}

impl Route {
    /// The route `opts` describes. Errors name the flag or variable at fault.
    pub(crate) fn new(opts: &NetOptions) -> anyhow::Result<Route> {
        let resolve = opts
            .resolve
            .iter()
            .map(|r| r.parse::<Resolve>().map_err(anyhow::Error::msg))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let explicit = opts
            .proxy
            .as_deref()
            .map(|p| parse_proxy(p, "--proxy"))
            .transpose()?;
        let env = |name: &str| {
            opts.proxy_env
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        let from_env = |names: &[&str]| -> anyhow::Result<Option<Proxy>> {
            for name in names {
                if let Some(v) = env(name).filter(|v| !v.trim().is_empty()) {
                    return parse_proxy(v.trim(), name).map(Some);
                }
            }
            Ok(None)
        };
        Ok(Route {
            resolve,
            explicit,
            http_env: from_env(&["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"])?,
            https_env: from_env(&["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"])?,
            no_proxy: env("no_proxy")
                .or_else(|| env("NO_PROXY"))
                .unwrap_or_default()
                .split(',')
                .map(|e| e.trim().trim_start_matches('.').to_ascii_lowercase())
                .filter(|e| !e.is_empty())
                .collect(),
        })
    }

    /// The proxy `url` goes through, if any: `--proxy`, else the environment's for its scheme;
    /// never for a host listed in `NO_PROXY`, and the environment's never for a loopback host.
    pub(crate) fn proxy_for(&self, url: &url::Url) -> Option<url::Url> {
        let host = url.host_str()?.to_ascii_lowercase();
        let host = unbracketed(&host);
        if bypassed(&self.no_proxy, host) {
            return None;
        }
        if let Some(p) = &self.explicit {
            return Some(p.url.clone());
        }
        if is_loopback(host) {
            return None;
        }
        let env = if url.scheme() == "https" {
            &self.https_env
        } else {
            &self.http_env
        };
        env.as_ref().map(|p| p.url.clone())
    }

    /// The `--resolve` entries, for the ordinary client.
    pub(crate) fn overrides(&self) -> &[Resolve] {
        &self.resolve
    }

    /// One-line facts for the run's header and every report: each proxy in use and where it
    /// was configured, each fixed address.
    pub(crate) fn context(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let mut proxies: Vec<&Proxy> = Vec::new();
        for p in [&self.explicit, &self.https_env, &self.http_env]
            .into_iter()
            .flatten()
        {
            if !proxies.iter().any(|q| q.url == p.url) {
                proxies.push(p);
            }
        }
        for p in proxies {
            lines.push(format!("through the proxy {} ({})", shown(&p.url), p.from));
        }
        for r in &self.resolve {
            lines.push(format!(
                "{}:{} resolved to {} (--resolve)",
                r.host, r.port, r.addr
            ));
        }
        lines
    }

    /// Opens a TCP connection to `host:port`, to the `--resolve` address when one is given.
    pub(crate) async fn dial(&self, host: &str, port: u16) -> Result<TcpStream, HttpError> {
        let bare = unbracketed(host);
        let fixed = self
            .resolve
            .iter()
            .find(|r| r.port == port && r.host.eq_ignore_ascii_case(bare))
            .map(|r| SocketAddr::new(r.addr, port));
        let addrs: Vec<SocketAddr> = match fixed {
            Some(addr) => vec![addr],
            None => tokio::net::lookup_host(format!("{host}:{port}"))
                .await
                .map_err(|e| HttpError::Connect(format!("could not resolve {host}: {e}")))?
                .collect(),
        };
        let mut last = format!("could not resolve {host}: no address");
        for addr in addrs {
            match TcpStream::connect(addr).await {
                Ok(s) => return Ok(s),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    last = format!("connection refused to {addr}");
                }
                Err(e) => last = format!("could not connect to {addr}: {e}"),
            }
        }
        Err(HttpError::Connect(last))
    }
}

/// A proxy URL; `host:port` alone means `http://host:port`, as in curl.
fn parse_proxy(text: &str, from: &str) -> anyhow::Result<Proxy> {
    let with_scheme = if text.contains("://") {
        text.to_string()
    } else {
        format!("http://{text}")
    };
    let url = url::Url::parse(&with_scheme).with_context(|| {
        format!(
            "{from}: {:?} is not a proxy URL (http://host:port)",
            quoted(text)
        )
    })?;
    if url.scheme() != "http" {
        bail!(
            "{from}: only http:// proxies are supported, not {}:// (https targets are still \
             encrypted end to end: they go through the proxy in a CONNECT tunnel)",
            url.scheme()
        );
    }
    if url.host_str().is_none() {
        bail!("{from}: {:?} names no proxy host", quoted(text));
    }
    Ok(Proxy {
        url,
        from: from.to_string(),
    })
}

/// `text`, a proxy URL as given, as an error quotes it: its credentials masked by [`mask_url`].
/// The text may not parse, and a proxy URL has no path, so everything before its last `@` is
/// taken as the userinfo, even a password whose `/`, `?` or `#` would end the authority early.
fn quoted(text: &str) -> String {
    let (scheme, rest) = match text.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), text),
    };
    match rest.rsplit_once('@') {
        Some((userinfo, host)) => mask_url(&format!(
            "{scheme}{}@{host}",
            userinfo.replace(['/', '?', '#'], "_")
        )),
        None => text.to_string(),
    }
}

/// `host` without the brackets a URL puts around an IPv6 address: what DNS, `--resolve` and a
/// TLS server name compare.
pub(crate) fn unbracketed(host: &str) -> &str {
    host.trim_start_matches('[').trim_end_matches(']')
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host.ends_with(".localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether a `NO_PROXY` entry covers `host`: `*`, the host itself, a parent domain, an IP
/// address or an IP network (`10.0.0.0/8`).
fn bypassed(no_proxy: &[String], host: &str) -> bool {
    no_proxy.iter().any(|entry| {
        entry == "*"
            || entry == host
            || host
                .strip_suffix(entry.as_str())
                .is_some_and(|rest| rest.ends_with('.'))
            || in_network(entry, host)
    })
}

fn in_network(entry: &str, host: &str) -> bool {
    let (Some((net, bits)), Ok(ip)) = (entry.split_once('/'), host.parse::<IpAddr>()) else {
        return false;
    };
    let (Ok(net), Ok(bits)) = (net.parse::<IpAddr>(), bits.parse::<u32>()) else {
        return false;
    };
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) if bits <= 32 => {
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            u32::from(n) & mask == u32::from(i) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(i)) if bits <= 128 => {
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            u128::from(n) & mask == u128::from(i) & mask
        }
        _ => false,
    }
}

/// A proxy URL without its credentials.
pub fn shown(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port_or_known_default() {
        Some(port) => format!("http://{host}:{port}"),
        None => format!("http://{host}"),
    }
}

/// The longest proxy answer to CONNECT accepted.
const MAX_CONNECT_REPLY: usize = 16 * 1024;

/// Asks the proxy on `tcp` for a tunnel to `host:port` and reads its answer byte by byte, so
/// not one byte of the tunnel is consumed. Credentials in the proxy URL are sent as
/// `Proxy-Authorization: Basic`.
pub(crate) async fn tunnel(
    tcp: &mut TcpStream,
    host: &str,
    port: u16,
    proxy: &url::Url,
) -> Result<(), HttpError> {
    let authority = format!("{host}:{port}");
    let mut request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if !proxy.username().is_empty() {
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        };
        let user = decode(proxy.username());
        let pass = decode(proxy.password().unwrap_or_default());
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        request.push_str(&format!("Proxy-Authorization: Basic {token}\r\n"));
    }
    request.push_str("\r\n");
    let via = shown(proxy);
    tcp.write_all(request.as_bytes())
        .await
        .map_err(|e| HttpError::Proxy(format!("writing CONNECT to the proxy {via} failed: {e}")))?;
    let mut reply = Vec::with_capacity(256);
    while !reply.ends_with(b"\r\n\r\n") {
        if reply.len() >= MAX_CONNECT_REPLY {
            return Err(HttpError::Proxy(format!(
                "the proxy {via} sent an over-long answer to CONNECT"
            )));
        }
        let byte = tcp.read_u8().await.map_err(|e| {
            HttpError::Proxy(format!(
                "the proxy {via} closed the connection during CONNECT {authority}: {e}"
            ))
        })?;
        reply.push(byte);
    }
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut head = httparse::Response::new(&mut headers);
    match head.parse(&reply) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => {
            return Err(HttpError::Proxy(format!(
                "the proxy {via} answered CONNECT with something that is not HTTP"
            )))
        }
    }
    match head.code.unwrap_or_default() {
        200..=299 => Ok(()),
        407 => Err(HttpError::Proxy(format!(
            "the proxy {via} wants credentials (407): give them in the proxy URL, http://user:password@host:port"
        ))),
        code => Err(HttpError::Proxy(format!(
            "the proxy {via} refused CONNECT {authority}: {code} {}",
            head.reason.unwrap_or_default()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_entries_parse_like_curl() {
        let r: Resolve = "API.example.com:443:10.0.0.7".parse().unwrap();
        assert_eq!(r.host, "api.example.com");
        assert_eq!(r.port, 443);
        assert_eq!(r.addr, "10.0.0.7".parse::<IpAddr>().unwrap());
        let v6: Resolve = "h:8443:[::1]".parse().unwrap();
        assert_eq!(v6.addr, "::1".parse::<IpAddr>().unwrap());
        assert!("h:443"
            .parse::<Resolve>()
            .unwrap_err()
            .contains("HOST:PORT:ADDR"));
        assert!("h:x:1.2.3.4".parse::<Resolve>().is_err());
        assert!("h:1:nope"
            .parse::<Resolve>()
            .unwrap_err()
            .contains("not an IP"));
    }

    #[test]
    fn no_proxy_matches_hosts_domains_and_networks() {
        let list: Vec<String> = ["example.com", "10.0.0.0/8", "::1/128"]
            .map(String::from)
            .to_vec();
        assert!(bypassed(&list, "example.com"));
        assert!(bypassed(&list, "api.example.com"));
        assert!(!bypassed(&list, "badexample.com"));
        assert!(bypassed(&list, "10.2.3.4"));
        assert!(!bypassed(&list, "11.2.3.4"));
        assert!(bypassed(&list, "::1"));
        assert!(bypassed(&["*".to_string()], "anything"));
    }

    #[test]
    fn proxy_urls_are_checked() {
        assert_eq!(
            parse_proxy("proxy.local:3128", "--proxy")
                .unwrap()
                .url
                .as_str(),
            "http://proxy.local:3128/"
        );
        let e = parse_proxy("socks5://p:1080", "ALL_PROXY")
            .unwrap_err()
            .to_string();
        assert!(e.contains("ALL_PROXY") && e.contains("only http://"), "{e}");
        let u = url::Url::parse("http://user:secret@p.local:3128").unwrap();
        assert_eq!(shown(&u), "http://p.local:3128");
    }
}
