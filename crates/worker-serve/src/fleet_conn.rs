//! How a host reaches its fleet database (issue #45): the `--ledger` URL checked
//! ([`FleetUrl::parse`]), the password found off the command line
//! ([`FleetUrl::find_password`]), and the session encrypted when the URL asks for TLS
//! ([`FleetUrl::connect`]).
//!
//! A password is never taken from the URL: a command line is readable by every user of the
//! host (`ps`, `/proc/*/cmdline`) and kept in shell history and unit files. It comes from a
//! file given by path (`--ledger-password-file`) or from libpq's own password file
//! (`PGPASSFILE`, else `~/.pgpass`), both read under the key files' rules (a regular file of
//! this user, mode 0600 or stricter, no symlink; [`keyfile::load_secret_text`]) and held in a
//! zeroizing buffer.
//!
//! TLS: `sslmode=require`, `verify-ca` and `verify-full` all get rustls with the server's
//! certificate checked against `sslrootcert` (a PEM file; `system` for the host's store;
//! default `~/.postgresql/root.crt`, as libpq) and its host name: never weaker than
//! verify-full, and never a fallback to plain text (a server that does not offer TLS is
//! refused). `allow` and `prefer`, which fall back without saying so, are refused; no
//! `sslmode` (or `disable`) is plain text, for a loopback or private link.
//!
//! Not here: what the ledger does over the session (`fleet`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use keyfile::{KeyError, KeySource};
use postgres::config::Host;
use postgres::{Client, Config, NoTls};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio_postgres_rustls::MakeRustlsConnect;
use zeroize::Zeroizing;

/// The fleet database cannot be reached as configured; a restart will not fix it (78).
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// The URL holds a password (in its user part or as `password=`).
    #[error(
        "the fleet database's URL holds a password, and a command line is readable by every \
         user of the host (ps), kept in shell history and unit files: remove it from the URL \
         and give it in --ledger-password-file FILE (mode 0600) or in libpq's password file \
         (PGPASSFILE, else ~/.pgpass, mode 0600)"
    )]
    PasswordInUrl,
    /// The URL does not parse (the client's message names the option, never its value).
    #[error("fleet ledger URL: {0}")]
    Url(#[source] postgres::Error),
    /// A `sslmode` that may fall back to plain text without saying so, or one not known.
    #[error(
        "fleet ledger URL: sslmode={0} is refused: it may fall back to plain text without \
         saying so; say sslmode=verify-full (TLS, the server's certificate checked against \
         sslrootcert and its host name) or sslmode=disable (plain text: loopback or a \
         private link only)"
    )]
    SslMode(String),
    /// TLS asked for, and no CA to check the server against.
    #[error(
        "fleet ledger URL: sslmode={mode} needs the CA that issued the server's certificate: \
         sslrootcert=FILE (PEM), sslrootcert=system, or {default}"
    )]
    NoRootCert {
        /// The mode asked for.
        mode: String,
        /// libpq's default file.
        default: String,
    },
    /// The CA file could not be read or holds no certificate.
    #[error("fleet ledger URL: sslrootcert {path}: {detail}")]
    RootCert {
        /// The file.
        path: PathBuf,
        /// What failed.
        detail: String,
    },
    /// The TLS client could not be set up.
    #[error("fleet ledger: TLS: {0}")]
    Tls(#[source] rustls::Error),
    /// `--ledger-password-file` could not be used.
    #[error("fleet ledger: --ledger-password-file: {0}")]
    PasswordFile(#[source] KeyError),
    /// libpq's password file exists and could not be used.
    #[error("fleet ledger: libpq password file {path}: {source}")]
    PgPass {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: KeyError,
    },
}

/// The session's encryption.
#[derive(Clone)]
enum Tls {
    /// Plain text (`sslmode=disable` or none).
    Plain,
    /// TLS, the server's certificate and name verified.
    Verified(MakeRustlsConnect),
}

/// How long a session whose packets go unanswered (a partition, a peer host gone, a NAT or
/// firewall forgetting the flow: no RST, no FIN) may hold a statement before the client
/// gives it up as lost: the TCP user timeout, and the keepalive's idle time plus its
/// unanswered probes. Without it the kernel's retransmissions decide (`tcp_retries2` = 15:
/// about 15 minutes), and the service's loop, its lease renewals and its heartbeat wait
/// that long. Well above a loaded server's answer time: only a path that answers nothing
/// is cut.
pub const SESSION_DEAD_WITHIN: Duration = Duration::from_secs(30);

/// Idle time of a session before its first keepalive probe (the client's default is two
/// hours), then a probe every [`KEEPALIVE_INTERVAL`], [`KEEPALIVE_RETRIES`] of them (the
/// kernel lets the user timeout decide when unanswered probes end it): a session that
/// answers nothing while no statement is under way is found dead within about
/// `KEEPALIVE_IDLE` + [`SESSION_DEAD_WITHIN`], before the next statement is sent into it.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_RETRIES: u32 = 4;

/// The URL's options that say how a dead session is found; one the URL sets is kept.
const LIVENESS_OPTIONS: [&str; 5] = [
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_retries",
    "tcp_user_timeout",
];

/// A checked fleet database URL: no password in it, its TLS settled.
#[derive(Clone)]
pub struct FleetUrl {
    config: Config,
    tls: Tls,
    /// The mode the URL asked for, for messages.
    sslmode: String,
    /// The [`LIVENESS_OPTIONS`] the URL set.
    liveness_set: Vec<&'static str>,
}

impl fmt::Debug for FleetUrl {
    // The config may hold the password found for it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FleetUrl({self})")
    }
}

impl fmt::Display for FleetUrl {
    /// `user@host:port/db sslmode=…`: never a password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let user = self.config.get_user().unwrap_or("");
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        let db = self.config.get_dbname().unwrap_or(user);
        write!(
            f,
            "{user}@{}:{port}/{db} sslmode={}",
            host_name(&self.config),
            self.sslmode
        )
    }
}

/// The first host the config names, as libpq's password file names it.
fn host_name(config: &Config) -> String {
    match config.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        // libpq matches a socket in the default directory as "localhost".
        Some(Host::Unix(_)) | None => "localhost".to_owned(),
    }
}

impl FleetUrl {
    /// Checks `text`, a `postgres://` URL: refused with a password in it, with a `sslmode`
    /// that may fall back to plain text, or with TLS asked for and no CA to check against.
    pub fn parse(text: &str) -> Result<Self, ConnError> {
        let (base, query) = text.split_once('?').unwrap_or((text, ""));
        if userinfo_has_password(base) {
            return Err(ConnError::PasswordInUrl);
        }
        let mut kept = Vec::new();
        let (mut sslmode, mut rootcert) = (None, None);
        let mut liveness_set = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            liveness_set.extend(LIVENESS_OPTIONS.iter().find(|o| **o == key));
            match key {
                "password" => return Err(ConnError::PasswordInUrl),
                "sslmode" => sslmode = Some(percent_decode(value)),
                "sslrootcert" => rootcert = Some(percent_decode(value)),
                _ => kept.push(pair),
            }
        }
        let sslmode = sslmode.unwrap_or_else(|| "disable".to_owned());
        let tls = match sslmode.as_str() {
            "disable" => Tls::Plain,
            "require" | "verify-ca" | "verify-full" => {
                Tls::Verified(verifying_connector(&sslmode, rootcert.as_deref())?)
            }
            other => return Err(ConnError::SslMode(other.chars().take(32).collect())),
        };
        // The client knows only disable, prefer and require; which certificate is good
        // enough is the connector's to decide.
        kept.push(match tls {
            Tls::Plain => "sslmode=disable",
            Tls::Verified(_) => "sslmode=require",
        });
        let rebuilt = format!("{base}?{}", kept.join("&"));
        let config = Config::from_str(&rebuilt).map_err(ConnError::Url)?;
        if config.get_password().is_some() {
            return Err(ConnError::PasswordInUrl);
        }
        Ok(Self {
            config,
            tls,
            sslmode,
            liveness_set,
        })
    }

    /// The URL with `password` to log in with (the library's callers; `worker serve` finds
    /// it with [`FleetUrl::find_password`]).
    #[must_use]
    pub fn with_password(mut self, password: &str) -> Self {
        self.config.password(password.as_bytes());
        self
    }

    /// Finds the password: from `file` when given (`--ledger-password-file`), else from
    /// libpq's password file (`PGPASSFILE`, else `~/.pgpass`) when there is one and a line
    /// of it matches; else none (the server may not ask for one).
    pub fn find_password(self, file: Option<&Path>) -> Result<Self, ConnError> {
        if let Some(file) = file {
            let password = keyfile::load_secret_text(&KeySource::File(file.to_owned()))
                .map_err(ConnError::PasswordFile)?;
            return Ok(self.with_password(&password));
        }
        let Some(pgpass) = pgpass_path() else {
            return Ok(self);
        };
        self.password_from_pgpass(&pgpass)
    }

    /// The password of the first line of the libpq password file `path` that matches this
    /// URL; none when the file does not exist or no line matches.
    pub fn password_from_pgpass(self, path: &Path) -> Result<Self, ConnError> {
        if !path.exists() {
            return Ok(self);
        }
        let text =
            keyfile::load_secret_text(&KeySource::File(path.to_owned())).map_err(|source| {
                ConnError::PgPass {
                    path: path.to_owned(),
                    source,
                }
            })?;
        let host = host_name(&self.config);
        let port = self
            .config
            .get_ports()
            .first()
            .copied()
            .unwrap_or(5432)
            .to_string();
        let user = self.config.get_user().unwrap_or("").to_owned();
        let db = self.config.get_dbname().unwrap_or(&user).to_owned();
        let want = [host.as_str(), port.as_str(), db.as_str(), user.as_str()];
        let found = text.lines().find_map(|line| {
            if line.starts_with('#') {
                return None;
            }
            let fields = pgpass_fields(line);
            let [h, p, d, u, password] = fields.as_slice() else {
                return None;
            };
            let matches = [h, p, d, u]
                .iter()
                .zip(want)
                .all(|(field, want)| field.as_str() == "*" || field.as_str() == want);
            matches.then(|| Zeroizing::new(password.to_string()))
        });
        Ok(match found {
            Some(password) => self.with_password(&password),
            None => self,
        })
    }

    /// Opens a session: TLS verified when the URL asked for it, never plain text then.
    pub fn connect(&self) -> Result<Client, postgres::Error> {
        match &self.tls {
            Tls::Plain => self.config.connect(NoTls),
            Tls::Verified(tls) => self.config.connect(tls.clone()),
        }
    }

    /// The host as the URL names it (never the password), for messages.
    pub fn host(&self) -> String {
        host_name(&self.config)
    }

    /// Sets the connect timeout unless the URL set one.
    pub fn default_connect_timeout(&mut self, timeout: std::time::Duration) {
        if self.config.get_connect_timeout().is_none() {
            self.config.connect_timeout(timeout);
        }
    }

    /// Bounds how long a silently dropped session can hold a statement
    /// ([`SESSION_DEAD_WITHIN`]): the TCP user timeout and keepalives, each unless the URL
    /// set it (`keepalives=0` in the URL turns the probes off; the user timeout stays).
    pub fn default_liveness(&mut self) {
        let unset = |option| !self.liveness_set.contains(&option);
        let (user_timeout, idle, interval, retries) = (
            unset("tcp_user_timeout"),
            unset("keepalives_idle"),
            unset("keepalives_interval"),
            unset("keepalives_retries"),
        );
        if user_timeout {
            self.config.tcp_user_timeout(SESSION_DEAD_WITHIN);
        }
        if idle {
            self.config.keepalives_idle(KEEPALIVE_IDLE);
        }
        if interval {
            self.config.keepalives_interval(KEEPALIVE_INTERVAL);
        }
        if retries {
            self.config.keepalives_retries(KEEPALIVE_RETRIES);
        }
    }
}

/// Whether the URL's user part (before `@`, after `://`) holds `user:password`.
fn userinfo_has_password(base: &str) -> bool {
    let rest = base.split_once("://").map_or(base, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or("");
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

/// `%XX` decoded; a malformed escape kept as written.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b, hex) {
            (b'%', Some(decoded)) => {
                out.push(decoded);
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One line of a libpq password file split at unescaped `:` (`\:` and `\\` escaped).
fn pgpass_fields(line: &str) -> Vec<Zeroizing<String>> {
    let mut fields = vec![Zeroizing::new(String::new())];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        let field = fields.last_mut();
        match (c, field) {
            ('\\', Some(field)) => {
                if let Some(next) = chars.next() {
                    field.push(next);
                }
            }
            (':', _) => fields.push(Zeroizing::new(String::new())),
            (c, Some(field)) => field.push(c),
            (_, None) => {}
        }
    }
    fields
}

/// `PGPASSFILE`, else `$HOME/.pgpass`, as libpq looks.
fn pgpass_path() -> Option<PathBuf> {
    match std::env::var_os("PGPASSFILE") {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ => std::env::var_os("HOME").map(|home| Path::new(&home).join(".pgpass")),
    }
}

/// rustls over the CA named by `sslrootcert` (libpq's default file when not named), the
/// server's certificate chain and host name both checked.
fn verifying_connector(mode: &str, rootcert: Option<&str>) -> Result<MakeRustlsConnect, ConnError> {
    let default = std::env::var_os("HOME")
        .map(|home| Path::new(&home).join(".postgresql/root.crt"))
        .unwrap_or_else(|| PathBuf::from("~/.postgresql/root.crt"));
    let mut roots = rustls::RootCertStore::empty();
    match rootcert {
        Some("system") => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(ConnError::RootCert {
                    path: PathBuf::from("system"),
                    detail: "the host's certificate store holds no usable certificate".into(),
                });
            }
        }
        named => {
            let path = match named {
                Some(path) => PathBuf::from(path),
                None if default.is_file() => default,
                None => {
                    return Err(ConnError::NoRootCert {
                        mode: mode.to_owned(),
                        default: default.display().to_string(),
                    });
                }
            };
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&path)
                .and_then(Iterator::collect)
                .map_err(|e| ConnError::RootCert {
                    path: path.clone(),
                    detail: e.to_string(),
                })?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(ConnError::RootCert {
                    path,
                    detail: "holds no usable certificate (PEM)".into(),
                });
            }
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(ConnError::Tls)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const SECRET: &str = "s3cret-in-url";

    #[test]
    fn a_password_in_the_url_is_refused_naming_the_safe_ways_and_never_echoed() {
        for url in [
            format!("postgres://fleet:{SECRET}@db.example:5432/fleet"),
            format!("postgresql://fleet:{SECRET}@db.example/fleet?sslmode=disable"),
            format!("postgres://fleet@db.example/fleet?password={SECRET}"),
            format!("postgres://fleet@db.example/fleet?application_name=x&password={SECRET}"),
            // Broken elsewhere too: the password is still what is refused, and not echoed.
            format!("postgres://fleet:{SECRET}@db.example:notaport/fleet"),
        ] {
            let err = FleetUrl::parse(&url).unwrap_err();
            assert!(matches!(err, ConnError::PasswordInUrl), "{url}: {err:?}");
            let text = err.to_string();
            assert!(!text.contains(SECRET), "{text}");
            for way in ["--ledger-password-file", "PGPASSFILE", "~/.pgpass"] {
                assert!(text.contains(way), "{way}: {text}");
            }
        }
    }

    #[test]
    fn a_url_that_does_not_parse_is_refused_without_echoing_its_values() {
        let err = FleetUrl::parse("postgres://fleet@db.example/fleet?frobnicate=hidden-value")
            .unwrap_err();
        assert!(matches!(err, ConnError::Url(_)), "{err:?}");
        assert!(!err.to_string().contains("hidden-value"), "{err}");
    }

    #[test]
    fn a_url_is_shown_without_its_password() {
        let url = FleetUrl::parse("postgres://fleet@db.example:6543/ledger")
            .unwrap()
            .with_password(SECRET);
        assert_eq!(
            url.to_string(),
            "fleet@db.example:6543/ledger sslmode=disable"
        );
        assert!(!format!("{url:?}").contains(SECRET));
    }

    #[test]
    fn sslmodes_that_fall_back_to_plain_text_silently_are_refused() {
        for mode in ["prefer", "allow", "verify_full", ""] {
            let err = FleetUrl::parse(&format!("postgres://fleet@db.example/fleet?sslmode={mode}"))
                .unwrap_err();
            assert!(matches!(err, ConnError::SslMode(_)), "{mode}: {err:?}");
            assert!(err.to_string().contains("verify-full"), "{err}");
        }
    }

    #[test]
    fn tls_without_a_ca_to_check_the_server_against_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-ca.pem");
        let err = FleetUrl::parse(&format!(
            "postgres://fleet@db.example/fleet?sslmode=verify-full&sslrootcert={}",
            missing.display()
        ))
        .unwrap_err();
        assert!(matches!(err, ConnError::RootCert { .. }), "{err:?}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = FleetUrl::parse(&format!(
            "postgres://fleet@db.example/fleet?sslmode=require&sslrootcert={}",
            empty.display()
        ))
        .unwrap_err();
        assert!(matches!(err, ConnError::RootCert { .. }), "{err:?}");
    }

    fn pgpass(dir: &Path, text: &str, mode: u32) -> PathBuf {
        let path = dir.join("pgpass");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn the_password_comes_from_the_first_matching_line_of_libpqs_password_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = pgpass(
            dir.path(),
            "# fleet\nother.example:5432:*:fleet:wrong\ndb.example:6543:ledger:fleet:pa\\:ss\\\\w\n*:*:*:*:fallback\n",
            0o600,
        );
        let url = FleetUrl::parse("postgres://fleet@db.example:6543/ledger")
            .unwrap()
            .password_from_pgpass(&file)
            .unwrap();
        assert_eq!(url.config.get_password(), Some(&b"pa:ss\\w"[..]));
        let url = FleetUrl::parse("postgres://fleet@elsewhere.example/ledger")
            .unwrap()
            .password_from_pgpass(&file)
            .unwrap();
        assert_eq!(url.config.get_password(), Some(&b"fallback"[..]));
        let none = FleetUrl::parse("postgres://fleet@db.example/ledger")
            .unwrap()
            .password_from_pgpass(&dir.path().join("absent"))
            .unwrap();
        assert_eq!(none.config.get_password(), None);
    }

    #[test]
    fn a_password_file_readable_by_others_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = pgpass(dir.path(), "*:*:*:*:secret-of-the-file\n", 0o644);
        let err = FleetUrl::parse("postgres://fleet@db.example/ledger")
            .unwrap()
            .password_from_pgpass(&file)
            .unwrap_err();
        assert!(matches!(err, ConnError::PgPass { .. }), "{err:?}");
        assert!(err.to_string().contains("0600"), "{err}");
        let err = FleetUrl::parse("postgres://fleet@db.example/ledger")
            .unwrap()
            .find_password(Some(&file))
            .unwrap_err();
        assert!(matches!(err, ConnError::PasswordFile(_)), "{err:?}");
        assert!(!err.to_string().contains("secret-of-the-file"), "{err}");
    }

    /// The session's own bound on a silent drop is set unless the URL says otherwise; an
    /// option the URL sets is the operator's and is kept.
    #[test]
    fn a_session_gets_a_user_timeout_and_keepalives_unless_the_url_sets_them() {
        let mut url = FleetUrl::parse("postgres://fleet@db.example/fleet").unwrap();
        url.default_liveness();
        let c = &url.config;
        assert_eq!(c.get_tcp_user_timeout(), Some(&SESSION_DEAD_WITHIN));
        assert!(c.get_keepalives());
        assert_eq!(c.get_keepalives_idle(), KEEPALIVE_IDLE);
        assert_eq!(c.get_keepalives_interval(), Some(KEEPALIVE_INTERVAL));
        assert_eq!(c.get_keepalives_retries(), Some(KEEPALIVE_RETRIES));
        assert!(
            KEEPALIVE_INTERVAL * KEEPALIVE_RETRIES + KEEPALIVE_IDLE <= SESSION_DEAD_WITHIN,
            "the probes end within the user timeout"
        );

        let mut url = FleetUrl::parse(
            "postgres://fleet@db.example/fleet?keepalives=0&tcp_user_timeout=90&keepalives_idle=60",
        )
        .unwrap();
        url.default_liveness();
        let c = &url.config;
        assert_eq!(c.get_tcp_user_timeout(), Some(&Duration::from_secs(90)));
        assert!(!c.get_keepalives());
        assert_eq!(c.get_keepalives_idle(), Duration::from_secs(60));
        assert_eq!(c.get_keepalives_interval(), Some(KEEPALIVE_INTERVAL));
    }
}
