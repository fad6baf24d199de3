//! The engine's event stream for one container, judged: whether anything but the program and
//! this worker's own kills acted on the container while it ran.

use crate::decision::EngineEvents;
use crate::engine::Event;

/// Container actions that only something other than the program and this worker can cause
/// while it runs: each means the exit code may not be the program's own. `kill` is judged
/// separately against the sandbox's own kills; `exec_*` actions match by prefix.
const FOREIGN_ACTIONS: [&str; 7] = [
    "stop",
    "destroy",
    "pause",
    "unpause",
    "restart",
    "update",
    "extract-to-dir",
];

/// The container's engine events up to its first exit after start.
#[derive(Debug, Default)]
pub(super) struct EventLog {
    started: bool,
    died: bool,
    /// `kill` events before the exit, by signal.
    kills: Vec<String>,
    /// Other actions before the exit that only an outsider causes.
    foreign: Vec<String>,
    /// Why the stream ended before the exit, if it did.
    ended: Option<String>,
}

impl EventLog {
    /// Whether the exit after start has been seen (nothing later is recorded).
    pub(super) fn died(&self) -> bool {
        self.died
    }

    /// Notes why the stream ended before the exit.
    pub(super) fn end(&mut self, reason: String) {
        self.ended = Some(reason);
    }

    pub(super) fn record(&mut self, event: &Event) {
        let action = event.action.as_str();
        if self.died {
            return;
        }
        // Foreign actions count from creation on (a copy into the container before start is
        // as much tampering as one during the run); the replayed `create` and `attach` and
        // this worker's own archive reads are not among them.
        match action {
            "start" if !self.started => self.started = true,
            "die" if self.started => self.died = true,
            "kill" => self.kills.push(event.signal.clone().unwrap_or_default()),
            // The engine's own OOM handling, judged from the container state, not an outsider.
            "oom" => {}
            other
                if FOREIGN_ACTIONS.contains(&other)
                    || other.starts_with("exec_")
                    || other == "start" =>
            {
                self.foreign.push(other.chars().take(80).collect());
            }
            _ => {}
        }
    }

    /// Whether anything but the program and `own_kills` SIGKILLs acted on the container.
    pub(super) fn judge(&self, own_kills: usize) -> EngineEvents {
        if !self.started {
            return EngineEvents::Unconfirmed {
                detail: "the engine's event stream did not show the container's start".into(),
            };
        }
        let mut outside = self.foreign.clone();
        // The sandbox only ever sends SIGKILL, at most `own_kills` times.
        let is_sigkill = |s: &&String| matches!(s.as_str(), "9" | "KILL" | "SIGKILL");
        let sigkills = self.kills.iter().filter(is_sigkill).count();
        for signal in self.kills.iter().filter(|s| !is_sigkill(s)) {
            outside.push(format!("kill (signal {signal})"));
        }
        for _ in 0..sigkills.saturating_sub(own_kills) {
            outside.push("kill (signal 9) not sent by the sandbox".into());
        }
        if !self.died
            && let Some(ended) = &self.ended
        {
            outside.push(format!("{ended} before the container exited"));
        }
        if !outside.is_empty() {
            return EngineEvents::External {
                detail: outside.join(", "),
            };
        }
        if !self.died {
            return EngineEvents::Unconfirmed {
                detail: "the engine's event stream did not show the container's exit".into(),
            };
        }
        EngineEvents::Clean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(action: &str, signal: Option<&str>) -> Event {
        Event {
            action: action.into(),
            actor: Some("c".into()),
            signal: signal.map(str::to_string),
        }
    }

    fn log_of(events: &[(&str, Option<&str>)]) -> EventLog {
        let mut log = EventLog::default();
        for (action, signal) in events {
            log.record(&event(action, *signal));
        }
        log
    }

    #[test]
    fn a_run_with_only_its_own_events_is_clean() {
        let log = log_of(&[
            ("create", None),
            ("attach", None),
            ("archive-path", None),
            ("start", None),
            ("oom", None),
            ("die", None),
            // After the exit: our own removal.
            ("kill", Some("9")),
            ("destroy", None),
        ]);
        assert_eq!(log.judge(0), EngineEvents::Clean);
        // Our own timeout kill.
        let log = log_of(&[("start", None), ("kill", Some("9")), ("die", None)]);
        assert_eq!(log.judge(1), EngineEvents::Clean);
    }

    #[test]
    fn kills_stops_and_tampering_we_did_not_do_are_external() {
        for events in [
            vec![("start", None), ("kill", Some("9")), ("die", None)],
            vec![("start", None), ("kill", Some("15")), ("die", None)],
            vec![
                ("start", None),
                ("kill", Some("15")),
                ("kill", Some("9")),
                ("die", None),
                ("stop", None),
            ],
            vec![
                ("start", None),
                ("pause", None),
                ("unpause", None),
                ("die", None),
            ],
            vec![("start", None), ("exec_create: sh", None), ("die", None)],
            vec![("extract-to-dir", None), ("start", None), ("die", None)],
            vec![("start", None), ("update", None), ("die", None)],
        ] {
            let log = log_of(&events);
            assert!(
                matches!(log.judge(0), EngineEvents::External { .. }),
                "{events:?}"
            );
        }
        // Two SIGKILLs where we sent one.
        let log = log_of(&[
            ("start", None),
            ("kill", Some("9")),
            ("kill", Some("9")),
            ("die", None),
        ]);
        assert!(matches!(log.judge(1), EngineEvents::External { .. }));
    }

    #[test]
    fn a_stream_without_start_or_exit_proves_nothing() {
        let log = log_of(&[("create", None)]);
        assert!(matches!(log.judge(0), EngineEvents::Unconfirmed { .. }));
        let log = log_of(&[("start", None)]);
        assert!(matches!(log.judge(0), EngineEvents::Unconfirmed { .. }));
        // The daemon going away mid-run ends the stream before the exit.
        let mut log = log_of(&[("start", None)]);
        log.ended = Some("the engine's event stream ended".into());
        assert!(matches!(log.judge(0), EngineEvents::External { .. }));
    }
}
