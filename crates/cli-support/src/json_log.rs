//! `--log-format json`: one JSON object per line, for log shippers. Written here over
//! `serde_json` rather than with tracing-subscriber's `json` feature, whose output nests the
//! fields differently per version; this shape is ours and tested.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// The event format.
pub(crate) struct JsonLines;

/// An event's fields as JSON values: numbers and booleans as such, the rest as text.
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().to_owned(), Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0
            .insert(field.name().to_owned(), Value::String(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
}

/// Now, as the log lines write it.
pub(crate) fn timestamp() -> String {
    let mut timestamp = String::new();
    let _ = SystemTime.format_time(&mut Writer::new(&mut timestamp));
    timestamp
}

/// The line for one event.
pub(crate) fn line(
    timestamp: String,
    level: &str,
    target: &str,
    mut fields: Map<String, Value>,
    spans: Vec<Value>,
) -> Value {
    let message = fields
        .remove("message")
        .unwrap_or(Value::String(String::new()));
    let mut object = Map::new();
    object.insert("timestamp".into(), timestamp.into());
    object.insert("level".into(), level.into());
    object.insert("target".into(), target.into());
    object.insert("message".into(), message);
    if !fields.is_empty() {
        object.insert("fields".into(), Value::Object(fields));
    }
    if !spans.is_empty() {
        object.insert("spans".into(), Value::Array(spans));
    }
    Value::Object(object)
}

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        let mut fields = Fields(Map::new());
        event.record(&mut fields);
        // The spans the event happened in (a job's, a run's), outermost first, with their
        // fields as the text formatter shows them.
        let spans = ctx
            .event_scope()
            .map(|scope| {
                scope
                    .from_root()
                    .map(|span| {
                        let recorded = span
                            .extensions()
                            .get::<FormattedFields<N>>()
                            .map(|f| f.fields.clone())
                            .unwrap_or_default();
                        serde_json::json!({"name": span.name(), "fields": recorded})
                    })
                    .collect()
            })
            .unwrap_or_default();
        let meta = event.metadata();
        let value = line(
            timestamp,
            meta.level().as_str(),
            meta.target(),
            fields.0,
            spans,
        );
        writeln!(writer, "{value}")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// One object per line, the message and the ids where a shipper looks for them.
    #[test]
    fn a_json_log_line_has_the_fixed_keys_and_the_fields_apart() {
        let mut fields = Map::new();
        fields.insert("message".into(), "run ended".into());
        fields.insert("job_id".into(), "base-mainnet:0xab:7".into());
        fields.insert("attempts".into(), 2u64.into());
        let value = line(
            "2026-12-05T01:00:00.000000Z".into(),
            "INFO",
            "worker_serve",
            fields,
            vec![],
        );
        let text = value.to_string();
        assert!(!text.contains('\n'));
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["message"], "run ended");
        assert_eq!(back["level"], "INFO");
        assert_eq!(back["target"], "worker_serve");
        assert_eq!(back["fields"]["job_id"], "base-mainnet:0xab:7");
        assert_eq!(back["fields"]["attempts"], 2);
        assert!(back.get("spans").is_none());
    }
}
