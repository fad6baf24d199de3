//! The URL policy: which URLs the client may contact at all, and how a URL is shown.

use std::net::IpAddr;

use reqwest::Url;

use crate::ClientError;

/// Parses `url` and applies the transport policy: `https` anywhere, plain `http` only to a
/// loopback host (127.0.0.0/8, `::1`, `localhost`), nothing else. Loopback is allowed so a
/// local platform or test server works without TLS; every other host must be authenticated
/// by TLS because a job feed or archive from a spoofed host would be run.
pub fn check_url(url: &str) -> Result<Url, ClientError> {
    let parsed = Url::parse(url).map_err(|e| ClientError::InvalidUrl(e.to_string()))?;
    match parsed.scheme() {
        "https" => {
            if parsed.host().is_none() {
                return Err(ClientError::InvalidUrl("url has no host".into()));
            }
            Ok(parsed)
        }
        "http" if is_loopback(&parsed) => Ok(parsed),
        _ => Err(ClientError::NotHttps {
            url: redact(&parsed),
        }),
    }
}

/// Whether the URL's host is a loopback address or `localhost`.
pub fn is_loopback(url: &Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    match bare.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}

/// `scheme://host[:port]/path` — without userinfo, query or fragment, which may carry
/// credentials and must never reach a log or an error message.
pub fn redact(url: &Url) -> String {
    let host = url.host_str().unwrap_or("");
    match url.port() {
        Some(port) => format!("{}://{host}:{port}{}", url.scheme(), url.path()),
        None => format!("{}://{host}{}", url.scheme(), url.path()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_is_accepted_everywhere_and_http_only_on_loopback() {
        for ok in [
            "https://api.example.com/v1",
            "https://10.0.0.1/x",
            "http://127.0.0.1:8080/v1",
            "http://127.5.6.7/",
            "http://[::1]:9/x",
            "http://localhost/x",
            "http://LOCALHOST:1/x",
        ] {
            assert!(check_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://api.example.com/v1",
            "http://10.0.0.1/x",
            "http://128.0.0.1/x",
            "http://[::2]/x",
            "http://localhost.example.com/x",
            "http://127.0.0.1.nip.io/x",
            "ftp://127.0.0.1/x",
            "file:///etc/passwd",
        ] {
            assert!(
                matches!(check_url(bad), Err(ClientError::NotHttps { .. })),
                "{bad}"
            );
        }
        assert!(matches!(
            check_url("not a url"),
            Err(ClientError::InvalidUrl(_))
        ));
    }

    #[test]
    fn refusal_never_shows_userinfo_or_query() {
        let err = check_url("http://user:hunter2@example.com/p?token=s3cret#frag").unwrap_err();
        let text = err.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!text.contains("user"), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("http://example.com/p"), "{text}");
    }
}
