//! Making untrusted text safe to show, and keeping secrets out of every output.
//!
//! Everything a server sends back is untrusted: a body can carry terminal escape sequences, bidi
//! overrides that reorder what a reader sees, NUL bytes that XML cannot hold even escaped, or bytes
//! that are not UTF-8 at all. Evidence also contains what idem-check itself sent, including the
//! tokens of the target file. Every renderer (terminal, JUnit, JSON, Markdown, curl lines) goes
//! through this one module so that no path forgets a rule:
//!
//! - [`sanitize_text`] / [`sanitize_line`] escape control, bidi and zero-width characters as
//!   `\x1B` / `\u{202E}` (the way fd's `sanitize.rs` does for file names);
//! - [`bytes_for_text`] shows a body capped in size, as hex when it is not UTF-8;
//! - [`cut_line`] keeps a quoted value readable at any size (a 1 MiB body quoted by a check
//!   becomes 200 characters, its size and its digest);
//! - [`Secrets`] knows every secret of a run by role (tenant A's and B's credentials, every
//!   cookie, headers whose name says key/token/secret/…, URL userinfo, secret query parameters,
//!   `--secret` values, `--redact-header` names) and masks them wherever they reappear.
//!
//! The two halves live apart: [`text`] makes text safe to show, [`secrets`] keeps secrets out.

mod secrets;
mod text;

pub use secrets::*;
pub use text::*;
