//! Stream tracking (configuration.txt §4.2 `track-sc0|1|2`, `sc-inc-gpc0|1`, `sc-set-gpt0`):
//! the stick counters of a session and what the data path counts on the entries they track.
//!
//! A session has three stick counters ([`Trackers`], kept in its `Vars`). A `track-scN`
//! rule looks the key up in its table and holds the entry ([`sluice_stick::Table::track`]) so
//! it can neither expire nor be purged; tracking counts a connection (`conn_cnt`,
//! `conn_rate`, `conn_cur`), and an HTTP request when the rule is an `http-request` one. While
//! it is tracked the entry counts the session's sessions, requests, errors and bytes; a
//! counter tracked by a content or HTTP rule is let go at the end of each HTTP transaction
//! (HAProxy's rules track again for the next one), the others when the session ends, which
//! also takes `conn_cur` back down (the `Drop` of [`Tracked`]). [`apply`] runs a rule's
//! action; `stream_context` answers the `sc_*`/`src_*` fetches from here.

use crate::stream_context::StreamView;
use sluice_config::stick::{GptValue, STICK_COUNTERS, StickAction};
use sluice_runtime::tables::Clock;
use sluice_sample::Sample;
use sluice_stick::{Data, DataType, EntryId, Gpc, KeyType, Table};
use std::cell::RefCell;
use std::sync::Arc;

/// Where a tracking rule runs: it decides what the first tracking counts and how long the
/// counter stays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// `tcp-request connection`.
    Connection,
    /// `tcp-request session`.
    Session,
    /// `tcp-request content` (and `tcp-response content`).
    Content,
    /// `http-request`.
    HttpRequest,
    /// `http-response`.
    HttpResponse,
}

/// One stick counter in use: a held entry of a table.
pub struct Tracked {
    table: Arc<Table>,
    /// Always `Some` until dropped.
    entry: Option<EntryId>,
    key: Box<[u8]>,
    /// Tracked by a content or HTTP rule: let go at the end of the transaction.
    per_transaction: bool,
    clock: Clock,
}

impl Tracked {
    /// Updates the entry with `f` at the current time.
    fn update<R>(&self, f: impl FnOnce(&mut Data<'_>, u32) -> R) -> Option<R> {
        let entry = self.entry.as_ref()?;
        self.table.update(entry, self.clock.now_ms(), f)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(entry) = self.entry.take() {
            self.table.release(entry, self.clock.now_ms(), |d| {
                d.decrement(DataType::ConnCur)
            });
        }
    }
}

/// A session's stick counters.
///
/// The slots are allocated by the first tracking rule: most sessions track nothing, and an
/// idle kept-alive session should not carry three empty counters.
#[derive(Default)]
pub struct Trackers {
    slots: RefCell<Option<Box<[Option<Tracked>; STICK_COUNTERS]>>>,
}

impl std::fmt::Debug for Trackers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let slots = self.slots.borrow();
        let used: Vec<bool> = (0..STICK_COUNTERS)
            .map(|n| slots.as_ref().is_some_and(|s| s[n].is_some()))
            .collect();
        f.debug_struct("Trackers").field("used", &used).finish()
    }
}

impl Trackers {
    /// True if counter `n` tracks an entry.
    pub fn is_tracked(&self, n: usize) -> bool {
        self.slots
            .borrow()
            .as_ref()
            .and_then(|s| s.get(n))
            .is_some_and(Option::is_some)
    }

    /// Runs `f` over counter `n`'s table, entry and key, if it tracks one.
    pub fn with<R>(
        &self,
        n: usize,
        f: impl FnOnce(&Arc<Table>, &EntryId, &[u8], Clock) -> R,
    ) -> Option<R> {
        let slots = self.slots.borrow();
        let tracked = slots.as_ref()?.get(n)?.as_ref()?;
        Some(f(
            &tracked.table,
            tracked.entry.as_ref()?,
            &tracked.key,
            tracked.clock,
        ))
    }

    /// Tracks `key` of `table` with counter `n` (unless it is in use), counting the
    /// connection, and the request when a content or `http-request` rule tracks during an
    /// HTTP request (`in_request`), as HAProxy counts it.
    fn track(
        &self,
        n: usize,
        table: &Arc<Table>,
        key: Vec<u8>,
        clock: Clock,
        stage: Stage,
        in_request: bool,
    ) {
        let mut slots = self.slots.borrow_mut();
        let slots = slots.get_or_insert_with(Box::default);
        let Some(slot) = slots.get_mut(n) else {
            return;
        };
        if slot.is_some() {
            return;
        }
        let now = clock.now_ms();
        let Some(entry) = table.track(&key, now) else {
            return;
        };
        table.update(&entry, now, |d, _| {
            d.count(DataType::ConnCnt, DataType::ConnRate, 1);
            d.add(DataType::ConnCur, 1);
            if in_request && matches!(stage, Stage::Content | Stage::HttpRequest) {
                d.count(DataType::HttpReqCnt, DataType::HttpReqRate, 1);
            }
        });
        *slot = Some(Tracked {
            table: Arc::clone(table),
            entry: Some(entry),
            key: key.into(),
            per_transaction: !matches!(stage, Stage::Connection | Stage::Session),
            clock,
        });
    }

    /// Counts on every tracked entry.
    fn count_all(&self, f: impl Fn(&mut Data<'_>)) {
        for tracked in self.slots.borrow().iter().flat_map(|s| s.iter()).flatten() {
            tracked.update(|d, _| f(d));
        }
    }

    /// The session was accepted (after the `tcp-request connection` and `session` rules).
    pub fn session_accepted(&self) {
        self.count_all(|d| d.count(DataType::SessCnt, DataType::SessRate, 1));
    }

    /// A new HTTP request arrived (counted on the counters the connection tracks).
    pub fn http_request(&self) {
        self.count_all(|d| d.count(DataType::HttpReqCnt, DataType::HttpReqRate, 1));
    }

    /// The request ended in an error: denied, tarpitted, invalid, or a 4xx from the server.
    pub fn http_error(&self) {
        self.count_all(|d| d.count(DataType::HttpErrCnt, DataType::HttpErrRate, 1));
    }

    /// The server failed the request: a 5xx but 501 and 505, an invalid response, none.
    pub fn http_failure(&self) {
        self.count_all(|d| d.count(DataType::HttpFailCnt, DataType::HttpFailRate, 1));
    }

    /// Bytes received from (`up`) and sent to (`down`) the client.
    pub fn bytes(&self, up: u64, down: u64) {
        if up == 0 && down == 0 {
            return;
        }
        self.count_all(|d| {
            d.count(DataType::BytesInCnt, DataType::BytesInRate, up);
            d.count(DataType::BytesOutCnt, DataType::BytesOutRate, down);
        });
    }

    /// The HTTP transaction ended: counters tracked by content and HTTP rules are let go.
    pub fn end_transaction(&self) {
        let released: Vec<Tracked> = {
            let mut slots = self.slots.borrow_mut();
            let Some(slots) = slots.as_mut() else {
                return;
            };
            if !slots.iter().flatten().any(|t| t.per_transaction) {
                return;
            }
            slots
                .iter_mut()
                .filter(|s| s.as_ref().is_some_and(|t| t.per_transaction))
                .filter_map(Option::take)
                .collect()
        };
        drop(released);
    }
}

/// The key of `sample` in a table of type `key`.
pub fn sample_key(key: KeyType, sample: &Sample<'_>) -> Option<Vec<u8>> {
    match sample {
        Sample::Ip(ip) => key.ip_key(*ip),
        Sample::Int(n) => key.int_key(*n),
        Sample::Bool(b) => key.int_key(i64::from(*b)),
        Sample::Str(b) | Sample::Bin(b) | Sample::Meth(b) => key.bytes_key(b),
    }
}

/// Increments a general-purpose counter and its rate; the new counter (or the rate when only
/// the rate is stored), 0 when the table stores neither, as HAProxy answers.
pub fn inc_gpc(d: &mut Data<'_>, which: Gpc) -> u64 {
    let (counter, rate) = which.types();
    d.add(counter, 1);
    d.add(rate, 1);
    d.get(counter).or_else(|| d.get(rate)).unwrap_or(0)
}

/// The integer an `sc-set-gpt*` or `sc-add-gpc` rule gives, if its expression gives one.
fn value_of(value: &GptValue, view: &StreamView<'_>) -> Option<i64> {
    match value {
        GptValue::Int(n) => Some(*n),
        GptValue::Expr(expr) => {
            expr.eval(view)
                .and_then(|s| match s.cast(sluice_sample::SampleType::Int) {
                    Some(Sample::Int(n)) => Some(n),
                    _ => None,
                })
        }
    }
}

/// Runs a tracking action of a rule at `stage`.
pub fn apply(action: &StickAction, view: &StreamView<'_>, stage: Stage) {
    let trackers = &view.vars.trackers;
    match action {
        StickAction::Track {
            counter,
            key,
            table,
        } => {
            if trackers.is_tracked(*counter) {
                return;
            }
            let Some(table) = table.as_deref().and_then(|t| view.process.tables.get(t)) else {
                return;
            };
            let Some(key) = key
                .eval(view)
                .and_then(|s| sample_key(table.conf().key, &s))
            else {
                return;
            };
            let clock = view.process.tables.clock();
            let in_request = view.request.is_some();
            trackers.track(*counter, table, key, clock, stage, in_request);
        }
        StickAction::IncGpc { which, counter } => {
            trackers.with(*counter, |table, entry, _, clock| {
                table.update(entry, clock.now_ms(), |d, _| inc_gpc(d, *which))
            });
        }
        StickAction::AddGpc {
            index,
            counter,
            value,
        } => {
            // An unsigned 32-bit value in HAProxy: other values wrap as they do there.
            if let Some(value) = value_of(value, view) {
                let amount = u64::from(value as u32);
                trackers.with(*counter, |table, entry, _, clock| {
                    table.update(entry, clock.now_ms(), |d, _| {
                        d.add(DataType::Gpc(*index), amount);
                        d.add(DataType::GpcRate(*index), amount);
                    })
                });
            }
        }
        StickAction::SetGpt {
            tag,
            counter,
            value,
        } => {
            // A tag is an unsigned 32-bit value in HAProxy: other values wrap as they do there.
            if let Some(value) = value_of(value, view) {
                trackers.with(*counter, |table, entry, _, clock| {
                    table.update(entry, clock.now_ms(), |d, _| {
                        d.set(*tag, u64::from(value as u32))
                    })
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_stick::{Layout, TableConf};

    fn table() -> Arc<Table> {
        let mut layout = Layout::default();
        for data in [
            DataType::ConnCnt,
            DataType::ConnCur,
            DataType::SessCnt,
            DataType::HttpReqCnt,
            DataType::HttpErrCnt,
            DataType::BytesInCnt,
        ] {
            layout.add(data, 0).expect("store");
        }
        Arc::new(Table::new(TableConf {
            name: "t".to_owned(),
            key: KeyType::Ip,
            size: 10,
            expire: Some(60_000),
            nopurge: false,
            layout,
        }))
    }

    fn values(table: &Table) -> Vec<(u32, Vec<Option<u64>>)> {
        let mut out = Vec::new();
        table.for_each(0, |e| {
            let data = [
                DataType::ConnCnt,
                DataType::ConnCur,
                DataType::SessCnt,
                DataType::HttpReqCnt,
                DataType::HttpErrCnt,
                DataType::BytesInCnt,
            ]
            .map(|t| e.data.get(t));
            out.push((e.refs, data.to_vec()));
        });
        out
    }

    #[test]
    fn a_session_counts_while_it_tracks() {
        let t = table();
        let clock = Clock::start();
        let trackers = Trackers::default();
        trackers.track(0, &t, vec![1, 2, 3, 4], clock, Stage::Connection, false);
        // A counter in use is not tracked again.
        trackers.track(0, &t, vec![9, 9, 9, 9], clock, Stage::Connection, false);
        trackers.session_accepted();
        trackers.http_request();
        trackers.http_error();
        trackers.bytes(10, 0);
        let counted = vec![Some(1), Some(1), Some(1), Some(1), Some(1), Some(10)];
        assert_eq!(values(&t), [(1, counted)]);
        drop(trackers);
        let released = vec![Some(1), Some(0), Some(1), Some(1), Some(1), Some(10)];
        assert_eq!(values(&t), [(0, released)]);
    }

    #[test]
    fn http_rules_track_for_one_transaction() {
        let t = table();
        let clock = Clock::start();
        let trackers = Trackers::default();
        trackers.track(1, &t, vec![1, 1, 1, 1], clock, Stage::Connection, false);
        trackers.track(2, &t, vec![2, 2, 2, 2], clock, Stage::HttpRequest, true);
        assert!(trackers.is_tracked(2));
        trackers.end_transaction();
        assert!(trackers.is_tracked(1) && !trackers.is_tracked(2));
        let rows = values(&t);
        // The HTTP rule counted its request when it tracked; the entry is free again.
        assert_eq!(
            rows[1],
            (
                0,
                vec![Some(1), Some(0), Some(0), Some(1), Some(0), Some(0)]
            )
        );
        assert_eq!(rows[0].0, 1);
    }

    #[test]
    fn sample_keys_follow_the_table_type() {
        let ip = Sample::Ip("10.0.0.1".parse().expect("address"));
        assert_eq!(sample_key(KeyType::Ip, &ip), Some(vec![10, 0, 0, 1]));
        assert_eq!(sample_key(KeyType::String(4), &ip), Some(b"10.0".to_vec()));
        assert_eq!(
            sample_key(KeyType::Integer, &Sample::Bool(true)),
            Some(vec![0, 0, 0, 1])
        );
        assert_eq!(sample_key(KeyType::Ip, &Sample::str(b"nope")), None);
    }
}
