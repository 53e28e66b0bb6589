//! Reporting a finished stream: the `-d` debug line and the frontend's log line
//! (`option httplog|tcplog`, `log-format`), with the connection counts read at the end.
//!
//! A `log-format` is rendered over the same [`StreamView`] the rules use, completed with the
//! record's facts (timers, bytes, termination state), so `%[...]` fetches and `%Tw`-style
//! aliases are both available.

use crate::stream_context::StreamView;
use sluice_runtime::process::Process;
use sluice_runtime::proxy::{Backend, Frontend, Server, counts};
use sluice_runtime::record::{RecordFacts, StreamRecord};

/// Reports `record` (an HTTP request when `http`, else a TCP session) to the debug output and
/// the frontend's log. `view` is what log-format fetches see of the stream.
pub fn report(
    process: &Process,
    frontend: &Frontend,
    backend: Option<&Backend>,
    server: Option<&Server>,
    record: &mut StreamRecord<'_>,
    http: bool,
    view: StreamView<'_>,
) {
    if process.stream_log.is_none() && frontend.logger.is_none() {
        return;
    }
    record.counts = counts(process.traffic.sessions.get(), frontend, backend, server);
    if let Some(log) = &process.stream_log {
        if http {
            log.http(record);
        } else {
            log.tcp(record);
        }
    }
    if frontend.logger.is_some() {
        let record: &StreamRecord<'_> = record;
        let facts = RecordFacts::new(record).with_unique_id(view.vars.unique_id());
        let view = StreamView {
            facts: Some(&facts),
            ..view
        };
        frontend.log_stream(record, http, &|fmt, out| fmt.render(&view, out));
    }
}
