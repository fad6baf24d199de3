//! `go test -json` (test2json) events, one JSON object per line:
//!
//! ```text
//! {"Time":"…","Action":"fail","Package":"example.com/m","Test":"TestX","Elapsed":0.01}
//! ```
//!
//! Only `pass`, `fail` and `skip` events that name a test are rows, named `Package.Test`
//! (`example.com/m.TestX`; just `Test` when an event has no `Package`); package events and
//! `output` events (which carry the `-v` text) are not.

use serde::Deserialize;

use super::{LineFormat, Sink};
use crate::name::decimal_to_micros;
use crate::report::{Runner, Status};

/// go -json has no state across lines.
#[derive(Debug, Default)]
pub(crate) struct GoJson;

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "Action", borrow)]
    action: std::borrow::Cow<'a, str>,
    #[serde(rename = "Package", default, borrow)]
    package: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "Test", default, borrow)]
    test: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "Elapsed", default)]
    elapsed: Option<serde_json::Number>,
}

impl LineFormat for GoJson {
    fn runner(&self) -> Runner {
        Runner::GoTestJson
    }

    fn line(&mut self, line: &str, sink: &mut Sink<'_>) {
        // Cheap checks first: most lines of most runs are not JSON events.
        if !line.starts_with("{\"") || !line.contains("\"Action\"") {
            return;
        }
        let Ok(event) = serde_json::from_str::<Event<'_>>(line) else {
            return;
        };
        let status = match event.action.as_ref() {
            "pass" => Status::Passed,
            "fail" => Status::Failed,
            "skip" => Status::Skipped,
            _ => return,
        };
        let Some(test) = event.test else {
            return;
        };
        // test2json prints seconds as a short decimal (0.02); anything else has no duration.
        let micros = event
            .elapsed
            .and_then(|n| decimal_to_micros(&n.to_string(), 6));
        // Package-qualified, as go -v's rows are: two packages' `TestX` are two rows.
        match event.package.as_deref() {
            Some(package) if !package.is_empty() => {
                sink.record(
                    Runner::GoTestJson,
                    &format!("{package}.{test}"),
                    status,
                    micros,
                );
            }
            _ => sink.record(Runner::GoTestJson, &test, status, micros),
        }
    }
}
