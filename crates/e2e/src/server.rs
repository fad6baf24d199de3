//! A loopback HTTP/1.1 server standing in for the platform API (the verification-jobs feed)
//! and for codeload (exact-commit tar.gz archives).

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex};

use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::Value;

use crate::E2eError;

/// Path prefix of the feed; every verifier and network query gets the same job list.
const FEED_PREFIX: &str = "/v1/base/autonomous-bounties/verification-jobs?";

type Routes = Arc<Mutex<HashMap<String, Vec<u8>>>>;

/// The server; it stops when the runtime that started it shuts down.
#[derive(Debug)]
pub struct ArchiveServer {
    url: String,
    routes: Routes,
}

impl ArchiveServer {
    /// Listens on an ephemeral loopback port (the shared `test-http` server) and serves
    /// `jobs` as the feed.
    pub async fn start(jobs: Value) -> Result<Self, String> {
        let feed = serde_json::to_vec(&jobs).map_err(|e| e.to_string())?;
        let routes: Routes = Arc::default();
        let served = routes.clone();
        let url = test_http::serve(move |request| {
            let response = respond(request.target(), &served, &feed);
            async move { Some(response) }
        })
        .await
        .map_err(|e| e.to_string())?;
        Ok(Self { url, routes })
    }

    /// Base URL, used both as `--api` and `--archive-base`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Serves at `path` a codeload-style archive: a pax global header naming the commit, the
    /// `<top>/` folder, and `files` under `<top>/<subdir>/`.
    pub fn add_archive(
        &self,
        path: &str,
        top: &str,
        subdir: &str,
        files: &[(String, Vec<u8>, bool)],
    ) -> Result<(), E2eError> {
        let archive = codeload_archive(top, subdir, files).map_err(|e| E2eError::Setup {
            what: "build a tar.gz archive",
            detail: e.to_string(),
        })?;
        self.routes
            .lock()
            .map_err(|_| E2eError::Setup {
                what: "register an archive",
                detail: "route table poisoned".into(),
            })?
            .insert(path.to_owned(), archive);
        Ok(())
    }
}

pub(crate) fn codeload_archive(
    top: &str,
    subdir: &str,
    files: &[(String, Vec<u8>, bool)],
) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast()));
    let record = {
        let body = format!(" comment={top}\n");
        // The pax length prefix counts its own digits.
        let mut len = body.len() + 1;
        while format!("{len}{body}").len() != len {
            len += 1;
        }
        format!("{len}{body}")
    };
    let mut global = tar::Header::new_ustar();
    global.set_entry_type(tar::EntryType::XGlobalHeader);
    global.set_path("pax_global_header")?;
    global.set_size(record.len() as u64);
    global.set_mode(0o666);
    global.set_cksum();
    builder.append(&global, record.as_bytes())?;
    let mut dirs = vec![format!("{top}/")];
    let mut prefix = top.to_owned();
    for part in subdir.split('/').filter(|p| !p.is_empty()) {
        prefix = format!("{prefix}/{part}");
        dirs.push(format!("{prefix}/"));
    }
    for d in dirs {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_path(&d)?;
        h.set_size(0);
        h.set_mode(0o755);
        h.set_cksum();
        builder.append(&h, std::io::empty())?;
    }
    for (rel, data, executable) in files {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_size(data.len() as u64);
        h.set_mode(if *executable { 0o755 } else { 0o644 });
        builder.append_data(&mut h, format!("{prefix}/{rel}"), data.as_slice())?;
    }
    let mut gz = builder.into_inner()?;
    gz.flush()?;
    gz.finish()
}

/// The feed for any feed query, a registered archive by exact path, else 404.
fn respond(target: &str, routes: &Routes, feed: &[u8]) -> test_http::Response {
    let found = if target.starts_with(FEED_PREFIX) {
        Some((feed.to_vec(), "application/json"))
    } else {
        routes
            .lock()
            .ok()
            .and_then(|r| r.get(target).cloned())
            .map(|b| (b, "application/x-gzip"))
    };
    let Some((body, kind)) = found else {
        let mut missing = test_http::Response::status(404);
        missing
            .headers
            .push(("Content-Type".into(), "text/plain".into()));
        return missing;
    };
    let mut response = test_http::Response::status(200);
    response.headers.push(("Content-Type".into(), kind.into()));
    response.body = body;
    response
}
