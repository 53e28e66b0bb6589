//! Variables set by rules (`set-var`, `unset-var`) and read by the `var()` fetch
//! (configuration.txt §2.8, §7.3.1 `set-var`).
//!
//! A session owns one [`Vars`]: the `sess.` scope lives as long as the client connection,
//! the `txn.`, `req.` and `res.` scopes are emptied when a transaction ends
//! ([`Vars::end_transaction`]). The `proc.` scope is shared by the whole process, so it sits
//! in one lock-protected table (`sluice_runtime::proc_vars`, which the CLI reads too). Variables are rare and small, so a short vector searched
//! linearly beats a hash map here; reading clones the value, which keeps the borrow of the
//! table short (rules may set a variable while another is being read). A variable that ends
//! with its transaction keeps its slot, name and (small) value buffer, unset: the next
//! transaction setting it again allocates nothing. The transaction's
//! captures (`capture request header`, `http-request capture`...) live here too: like `txn.`
//! variables they are per transaction, and every rule and log view already holds the
//! session's [`Vars`]. They and the unique id sit in a box made only for a transaction that
//! has them: every session holds its `Vars` for as long as it lives, idle time included.

use sluice_config::diag::Span;
use sluice_config::rules::{LogLevelChange, PacketField, PriorityPart, StreamTimeout};
use sluice_http::encode::HeaderCase;
use sluice_net::listen::Endpoints;
use sluice_net::proxy_protocol::ReceivedTlvs;
use sluice_runtime::capture::CaptureSet;
use sluice_runtime::listener::ListenerStats;
use sluice_runtime::proxy::QueuePriority;
use sluice_sample::Sample;
use std::borrow::Cow;
use std::cell::{Ref, RefCell};
use std::os::fd::{AsFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

/// What a transaction without a capture slot reads.
static NO_CAPTURES: CaptureSet = CaptureSet::EMPTY;

/// What a transaction may carry besides variables.
#[derive(Debug, Default)]
struct Transaction {
    /// The unique id (`unique-id-format`).
    unique_id: Option<Vec<u8>>,
    /// The captures.
    captures: CaptureSet,
    /// The addresses as `set-src`/`set-dst` made them for the transaction, if a rule did
    /// (as in HAProxy 2.6, the next request of the connection has the connection's again).
    /// Here, boxed with the rest, rather than in every session's state.
    addresses: Option<Endpoints>,
    /// The connection's addresses, kept when a rule first changed the transaction's: what
    /// `fc_src`, `fc_dst` and their ports read.
    connection_addresses: Option<Endpoints>,
    /// `set-timeout server` and `set-timeout tunnel`, with the proxy whose rules set them.
    timeouts: [Option<(u32, Duration)>; 2],
    /// `disable-l7-retry`: no `retry-on` retry but after a failed connection.
    no_l7_retries: bool,
    /// `early-hint`: the 103 answers to send the client, the last one still open while
    /// `early_hint_open`.
    early_hints: Vec<u8>,
    early_hint_open: bool,
    /// `set-priority-class|offset`: the request's place in a server queue.
    priority: QueuePriority,
    /// `set-fc-tos`, `set-fc-mark`: what the client connection's packets are to carry, until
    /// the session applies it to the socket ([`Vars::apply_client_marks`]).
    client_marks: ClientMarks,
    /// `cache-use` and `cache-store`: the request's key, the response found, the one to
    /// store.
    cache: Option<Box<crate::http::cache::CacheTxn>>,
    /// Where the last final rule the transaction matched was configured (see
    /// [`Vars::note_final_rule`]).
    last_rule: Option<Span>,
}

/// Whose `tcp-request content` rules a TCP frontend's inspection ran for the stream an HTTP
/// session's first request continues ([`Vars::set_inspected`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Inspected {
    /// None: the request starts a stream of its own.
    #[default]
    None,
    /// The frontend's (`switch-mode http` ended them).
    Frontend,
    /// The frontend's, then the HTTP backend it chose's own.
    FrontendAndBackend,
}

/// The TOS byte and the firewall mark rules asked for the packets sent to the client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ClientMarks {
    /// `set-fc-tos`.
    tos: Option<u8>,
    /// `set-fc-mark`.
    mark: Option<u32>,
}

/// The variables of one session.
#[derive(Debug, Default)]
pub struct Vars {
    entries: RefCell<Vec<Entry>>,
    /// The transaction's unique id and captures, when it has any.
    transaction: RefCell<Option<Box<Transaction>>>,
    /// `tcp-request connection expect-proxy layer4` applied: a PROXY header comes first.
    expects_proxy: std::cell::Cell<bool>,
    /// The connection started with a PROXY header (`fc_rcvd_proxy`).
    received_proxy: std::cell::Cell<bool>,
    /// The TLVs kept from that header, when it had any worth keeping.
    received_tlvs: std::cell::OnceCell<Box<ReceivedTlvs>>,
    /// The transaction's `set-log-level`, if a rule set it.
    log_level: std::cell::Cell<Option<LogLevelChange>>,
    /// The connection served a request before the one being handled (`http_first_req`).
    later_request: std::cell::Cell<bool>,
    /// See [`Vars::inspected`].
    inspected: std::cell::Cell<Inspected>,
    /// See [`Vars::socket_id`].
    socket_id: u32,
    /// See [`Vars::client_socket`].
    client_socket: Option<RawFd>,
    /// The transaction's number (`%rt`) plus one, once a format asked for it; 0 before.
    /// A cell of its own, not in the transaction's box: a log line may ask for it first,
    /// while the box is borrowed for its captures. 32 bits, as HAProxy's (`txn.id32`), which
    /// wrap.
    stream_number: std::cell::Cell<u32>,
    /// The session's stick counters (`track-sc0|1|2`): like `sess.` variables they live as
    /// long as the session, and every rule and fetch already holds the session's `Vars`.
    pub trackers: crate::track::Trackers,
    /// The listening socket the session came through, when its frontend counts each apart
    /// (`option socket-stats`): like the stick counters, read wherever the session counts.
    listener: Option<Arc<ListenerStats>>,
}

impl Vars {
    /// The variables of a session that came through its frontend's socket number
    /// `socket_id` (from 1), whose counters are `listener` under `option socket-stats` (see
    /// [`Vars::listener`]), on the client connection `client_socket`.
    pub fn through(
        (listener, socket_id): (Option<Arc<ListenerStats>>, u32),
        client_socket: RawFd,
    ) -> Vars {
        Vars {
            listener,
            socket_id,
            client_socket: Some(client_socket),
            ..Vars::default()
        }
    }

    /// The descriptor of the session's client connection, which the session holds open as
    /// long as its variables (`fc_rtt` reads what the kernel measures of it).
    pub fn client_socket(&self) -> Option<RawFd> {
        self.client_socket
    }

    /// The number of the frontend's socket the session came through, from 1 (`so_id`); 0
    /// when not known.
    pub fn socket_id(&self) -> u32 {
        self.socket_id
    }

    /// The counters of the listening socket the session came through, under `option
    /// socket-stats`.
    pub fn listener(&self) -> Option<&ListenerStats> {
        self.listener.as_deref()
    }

    /// The value of `name` (`scope.name`), if set.
    pub fn get(&self, name: &str) -> Option<Sample<'static>> {
        if name.starts_with("proc.") {
            let table = sluice_runtime::proc_vars::table();
            return lookup(&table, name);
        }
        self.entries
            .borrow()
            .iter()
            .find(|e| e.set && e.name == name)
            .map(|e| e.value.clone())
    }

    /// Sets `name` to `value`.
    pub fn set(&self, name: &str, value: Sample<'_>) {
        if name.starts_with("proc.") {
            let mut table = sluice_runtime::proc_vars::table();
            store(&mut table, name, value.into_owned());
            return;
        }
        let mut entries = self.entries.borrow_mut();
        match entries.iter_mut().find(|e| e.name == name) {
            Some(entry) => {
                assign(&mut entry.value, value);
                entry.set = true;
            }
            None => entries.push(Entry {
                name: name.to_owned(),
                value: value.into_owned(),
                set: true,
            }),
        }
    }

    /// Removes `name`.
    pub fn unset(&self, name: &str) {
        if name.starts_with("proc.") {
            let mut table = sluice_runtime::proc_vars::table();
            table.retain(|(n, _)| n != name);
        } else if let Some(entry) = self
            .entries
            .borrow_mut()
            .iter_mut()
            .find(|e| e.name == name)
        {
            entry.unset();
        }
    }

    /// Notes that the connection starts with a PROXY protocol header (`expect-proxy`).
    pub fn expect_proxy(&self) {
        self.expects_proxy.set(true);
    }

    /// Whether a rule said the connection starts with a PROXY protocol header.
    pub fn expects_proxy(&self) -> bool {
        self.expects_proxy.get()
    }

    /// Notes the PROXY header the connection started with, and the TLVs kept from it.
    pub fn proxy_header_received(&self, tlvs: Option<Box<ReceivedTlvs>>) {
        self.received_proxy.set(true);
        if let Some(tlvs) = tlvs {
            // A connection has one header: the cell is always empty here.
            let _ = self.received_tlvs.set(tlvs);
        }
    }

    /// Whether the connection started with a PROXY header (`fc_rcvd_proxy`).
    pub fn received_proxy(&self) -> bool {
        self.received_proxy.get()
    }

    /// The TLVs kept from the connection's PROXY header (`fc_pp_authority`...).
    pub fn received_tlvs(&self) -> Option<&ReceivedTlvs> {
        self.received_tlvs.get().map(|t| &**t)
    }

    /// `set-timeout`: `which` timeout is `time` for this transaction, when it goes to proxy
    /// `owner`'s servers.
    pub fn set_timeout(&self, which: StreamTimeout, owner: u32, time: Duration) {
        self.transaction().timeouts[which as usize] = Some((owner, time));
    }

    /// The transaction's `which` timeout set by the rules of backend `backend`, if any (the
    /// rules of a proxy that then routed the request elsewhere set none, as in HAProxy).
    pub fn timeout(&self, which: StreamTimeout, backend: u32) -> Option<Duration> {
        self.transaction
            .borrow()
            .as_ref()
            .and_then(|t| t.timeouts[which as usize])
            .filter(|(owner, _)| *owner == backend)
            .map(|(_, time)| time)
    }

    /// `set-log-level`: the transaction's log line goes at `level`, or nowhere.
    pub fn set_log_level(&self, level: LogLevelChange) {
        self.log_level.set(Some(level));
    }

    /// `set-src`, `set-dst`...: the transaction's addresses from now on, `before` being
    /// what they were (the connection's, at the first change).
    pub fn set_addresses(&self, addresses: Endpoints, before: Endpoints) {
        let mut transaction = self.transaction();
        transaction.connection_addresses.get_or_insert(before);
        transaction.addresses = Some(addresses);
    }

    /// The connection's addresses, if a rule changed the transaction's (else they are the
    /// transaction's).
    pub fn connection_addresses(&self) -> Option<Endpoints> {
        self.transaction
            .borrow()
            .as_ref()
            .and_then(|t| t.connection_addresses)
    }

    /// The transaction's addresses as rules set them, if they did.
    pub fn addresses(&self) -> Option<Endpoints> {
        self.transaction.borrow().as_ref().and_then(|t| t.addresses)
    }

    /// `set-priority-class` or `set-priority-offset`: `value`, brought into the part's range.
    pub fn set_priority(&self, part: PriorityPart, value: i64) {
        let mut transaction = self.transaction();
        let priority = &mut transaction.priority;
        match part {
            PriorityPart::Class => {
                let (low, high) = QueuePriority::CLASSES.into_inner();
                priority.class = value.clamp(low, high) as i32;
            }
            PriorityPart::Offset => {
                let (low, high) = QueuePriority::OFFSETS.into_inner();
                priority.offset_ms = value.clamp(low, high) as i32;
            }
        }
    }

    /// The transaction's queue priority (`prio_class`, `prio_offset`), the default unless a
    /// rule set it.
    pub fn priority(&self) -> QueuePriority {
        self.transaction
            .borrow()
            .as_ref()
            .map_or_else(QueuePriority::default, |t| t.priority)
    }

    /// `disable-l7-retry`: the transaction's request is retried after a failed connection
    /// only.
    pub fn disable_l7_retries(&self) {
        self.transaction().no_l7_retries = true;
    }

    /// Whether a rule disabled the transaction's layer-7 retries.
    pub fn l7_retries_disabled(&self) -> bool {
        self.transaction
            .borrow()
            .as_ref()
            .is_some_and(|t| t.no_l7_retries)
    }

    /// `early-hint`: adds the field `name: value` to the 103 answer being built, started if
    /// none is, and ends that answer when `last`. The name is written in lower case, as
    /// HAProxy writes it, unless `case` (`h1-case-adjust`) spells it otherwise; a value that
    /// cannot be a field value (a line break...) adds nothing.
    pub fn add_early_hint(
        &self,
        (name, value): (&str, &[u8]),
        case: Option<&HeaderCase>,
        last: bool,
    ) {
        let mut transaction = self.transaction();
        let t = &mut *transaction;
        if sluice_http::encode::is_valid_field(name, value) {
            if !t.early_hint_open {
                t.early_hints
                    .extend_from_slice(b"HTTP/1.1 103 Early Hints\r\n");
                t.early_hint_open = true;
            }
            let lower = name.to_ascii_lowercase();
            let spelled = case.map_or(lower.as_bytes(), |c| c.adjust(lower.as_bytes()));
            t.early_hints.extend_from_slice(spelled);
            t.early_hints.extend_from_slice(b": ");
            t.early_hints.extend_from_slice(value);
            t.early_hints.extend_from_slice(b"\r\n");
        }
        if last && t.early_hint_open {
            t.early_hints.extend_from_slice(b"\r\n");
            t.early_hint_open = false;
        }
    }

    /// The 103 answers the rules built since the last call, to be sent now.
    pub fn take_early_hints(&self) -> Option<Vec<u8>> {
        let mut transaction = self.transaction.borrow_mut();
        let t = transaction.as_mut()?;
        (!t.early_hints.is_empty() && !t.early_hint_open)
            .then(|| std::mem::take(&mut t.early_hints))
    }

    /// The transaction's cache state (`cache-use`, `cache-store`), made on first use.
    pub(crate) fn cache(&self) -> std::cell::RefMut<'_, crate::http::cache::CacheTxn> {
        std::cell::RefMut::map(self.transaction(), |t| {
            &mut **t.cache.get_or_insert_with(Box::default)
        })
    }

    /// The transaction's cache state, if a cache rule made one.
    pub(crate) fn cache_if_any(
        &self,
    ) -> Option<std::cell::RefMut<'_, crate::http::cache::CacheTxn>> {
        let transaction = self.transaction.borrow_mut();
        std::cell::RefMut::filter_map(transaction, |t| {
            t.as_mut().and_then(|t| t.cache.as_deref_mut())
        })
        .ok()
    }

    /// The index of the cache the transaction's response comes from (`res.cache_hit`): read
    /// without taking the transaction mutably, since fetches run while the log holds its
    /// captures.
    pub(crate) fn cache_served(&self) -> Option<usize> {
        let transaction = self.transaction.try_borrow().ok()?;
        transaction.as_ref()?.cache.as_ref()?.served()
    }

    /// Records what a `set-fc-tos` or `set-fc-mark` rule computed (`value`, cut to the field's
    /// width as the kernel cuts HAProxy's), for the session to apply to the client's socket.
    pub fn mark_client_packets(&self, field: PacketField, value: i64) {
        let marks = &mut self.transaction().client_marks;
        match field {
            PacketField::Tos => marks.tos = Some(value as u8),
            PacketField::Mark => marks.mark = Some(value as u32),
        }
    }

    /// Applies to the client's socket what rules asked of its packets since the last call, if
    /// anything. The session calls it once a rule set has run: rules see the session's
    /// variables, not its sockets. A refusal (a mark needs CAP_NET_ADMIN) is ignored, as
    /// HAProxy ignores it.
    pub fn apply_client_marks(&self, client: &impl AsFd) {
        let marks = {
            let mut transaction = self.transaction.borrow_mut();
            let Some(transaction) = transaction.as_mut() else {
                return;
            };
            std::mem::take(&mut transaction.client_marks)
        };
        if marks != ClientMarks::default() {
            let _ = sluice_net::stream::mark_packets(client, marks.tos, marks.mark);
        }
    }

    /// The transaction's log level, if a rule changed it.
    pub fn log_level(&self) -> Option<LogLevelChange> {
        self.log_level.get()
    }

    /// The transaction's box, made on first use.
    fn transaction(&self) -> std::cell::RefMut<'_, Transaction> {
        std::cell::RefMut::map(self.transaction.borrow_mut(), |t| {
            &mut **t.get_or_insert_with(Box::default)
        })
    }

    /// Sets the transaction's unique id.
    pub fn set_unique_id(&self, id: Vec<u8>) {
        self.transaction().unique_id = Some(id);
    }

    /// The transaction's unique id, if one was generated.
    pub fn unique_id(&self) -> Option<Vec<u8>> {
        self.transaction
            .borrow()
            .as_ref()
            .and_then(|t| t.unique_id.clone())
    }

    /// The transaction's captures.
    pub fn captures(&self) -> Ref<'_, CaptureSet> {
        Ref::map(self.transaction.borrow(), |t| {
            t.as_ref().map_or(&NO_CAPTURES, |t| &t.captures)
        })
    }

    /// Gives the transaction the empty capture slots `rules` declare, request and response,
    /// and a place for its captured cookies when they capture one (none of them: no box).
    pub fn start_captures(&self, rules: &sluice_config::rules::ProxyRules) {
        let (request, response) = (rules.request_captures.len(), rules.response_captures.len());
        let cookies = rules.cookie_capture.is_some();
        if request == 0 && response == 0 && !cookies && self.transaction.borrow().is_none() {
            return;
        }
        self.transaction().captures.reset(request, response);
    }

    /// Keeps a captured cookie (`capture cookie`) of the request or the response.
    pub fn capture_cookie(&self, response: bool, cookie: &[u8], len: usize) {
        self.transaction()
            .captures
            .store_cookie(response, cookie, len);
    }

    /// Stores a capture (see [`CaptureSet::store`]); `first_only` keeps an earlier value
    /// (a header is captured at its first occurrence).
    pub fn capture(
        &self,
        response: bool,
        index: usize,
        value: &[u8],
        len: usize,
        first_only: bool,
    ) {
        let captures = &mut self.transaction().captures;
        if !(first_only && captures.is_set(response, index)) {
            captures.store(response, index, value, len);
        }
    }

    /// The transaction's number in the process (`%rt`), `next` making one on the first
    /// call of the transaction; kept in 32 bits, wrapping.
    pub fn stream_number(&self, next: impl FnOnce() -> u64) -> u32 {
        match self.stream_number.get() {
            0 => {
                // 0 to u32::MAX - 1, stored plus one.
                let number = (next() % u64::from(u32::MAX)) as u32;
                self.stream_number.set(number + 1);
                number
            }
            stored => stored - 1,
        }
    }

    /// Notes the rule configured at `span` as the last final rule (one that ended its rule
    /// set: `accept`, `allow`, `deny`, `return`...) the transaction matched, when the
    /// configuration reads it (`last_rule_file`, `last_rule_line`). Kept in the
    /// transaction's box, which only such configurations then make for every transaction
    /// that matched a final rule: the others pay neither the allocation nor the room in
    /// every session.
    pub fn note_final_rule(&self, span: &Span) {
        if sluice_sample::last_rule_read() {
            self.transaction().last_rule = Some(span.clone());
        }
    }

    /// The file and line of the last final rule the transaction matched, if any.
    pub fn last_rule(&self) -> Option<(Arc<str>, u32)> {
        let transaction = self.transaction.borrow();
        let span = transaction.as_ref()?.last_rule.as_ref()?;
        Some((Arc::clone(&span.file), span.line))
    }

    /// Whether the request being handled is the connection's first (`http_first_req`),
    /// set as each request's handling starts.
    pub fn set_first_request(&self, first: bool) {
        self.later_request.set(!first);
    }

    /// See [`Vars::set_first_request`].
    pub fn first_request(&self) -> bool {
        !self.later_request.get()
    }

    /// Notes that a TCP frontend's content inspection ran the `tcp-request content` rules of
    /// `which` proxies before handing the connection to HTTP: its first request continues
    /// that stream, as in HAProxy, with its variables and captures and without running
    /// those rules again.
    pub fn set_inspected(&self, which: Inspected) {
        self.inspected.set(which);
    }

    /// Whose `tcp-request content` rules already ran for the request being handled; none
    /// once a transaction ended.
    pub fn inspected(&self) -> Inspected {
        self.inspected.get()
    }

    /// Forgets the variables of the transaction that ended (`txn.`, `req.`, `res.`), its
    /// captures and its unique id.
    pub fn end_transaction(&self) {
        self.inspected.set(Inspected::None);
        // The box goes too: an idle kept-alive session holds no capture slots.
        self.transaction.borrow_mut().take();
        self.log_level.set(None);
        self.stream_number.set(0);
        for entry in self.entries.borrow_mut().iter_mut() {
            if !entry.name.starts_with("sess.") {
                entry.unset();
            }
        }
    }
}

/// One variable slot of a session.
#[derive(Debug)]
struct Entry {
    /// `scope.name`.
    name: String,
    /// The value while `set`; once unset, what is left of it is a buffer to reuse.
    value: Sample<'static>,
    set: bool,
}

/// Values up to this size keep their buffer for the next transaction; a larger one is freed
/// (an idle session should not hold a large value it no longer has).
const KEPT_VALUE: usize = 256;

impl Entry {
    fn unset(&mut self) {
        self.set = false;
        if owned_bytes(&mut self.value).is_none_or(|b| b.capacity() > KEPT_VALUE) {
            self.value = Sample::Bool(false);
        }
    }
}

/// The bytes a sample owns, if it owns any.
fn owned_bytes<'s>(sample: &'s mut Sample<'static>) -> Option<&'s mut Vec<u8>> {
    match sample {
        Sample::Str(Cow::Owned(b)) | Sample::Bin(Cow::Owned(b)) | Sample::Meth(Cow::Owned(b)) => {
            Some(b)
        }
        _ => None,
    }
}

/// Stores `value` in `slot`: borrowed bytes are copied into the buffer the slot already
/// owns, so setting a variable again allocates nothing.
fn assign(slot: &mut Sample<'static>, value: Sample<'_>) {
    let borrowed = match &value {
        Sample::Str(Cow::Borrowed(b))
        | Sample::Bin(Cow::Borrowed(b))
        | Sample::Meth(Cow::Borrowed(b)) => *b,
        _ => {
            *slot = value.into_owned();
            return;
        }
    };
    let mut buffer = owned_bytes(slot).map(std::mem::take).unwrap_or_default();
    buffer.clear();
    buffer.extend_from_slice(borrowed);
    *slot = match value {
        Sample::Bin(_) => Sample::Bin(Cow::Owned(buffer)),
        Sample::Meth(_) => Sample::Meth(Cow::Owned(buffer)),
        _ => Sample::Str(Cow::Owned(buffer)),
    };
}

fn lookup(table: &[(String, Sample<'static>)], name: &str) -> Option<Sample<'static>> {
    table
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.clone())
}

fn store(table: &mut Vec<(String, Sample<'static>)>, name: &str, value: Sample<'static>) {
    match table.iter_mut().find(|(n, _)| n == name) {
        Some(entry) => entry.1 = value,
        None => table.push((name.to_owned(), value)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn early_hints_group_into_103_answers_sent_once_complete() {
        let vars = Vars::default();
        assert_eq!(vars.take_early_hints(), None);
        vars.add_early_hint(("Link", b"</a.css>"), None, false);
        // Not complete yet: nothing to send.
        assert_eq!(vars.take_early_hints(), None);
        // A value that would break the head adds nothing, and the answer still ends.
        vars.add_early_hint(("Link", b"x\r\nInjected: 1"), None, true);
        let mut case = HeaderCase::default();
        case.add("x-section", "X-SECTION").expect("a valid entry");
        vars.add_early_hint(("X-Section", b"/page"), Some(&case), true);
        assert_eq!(
            vars.take_early_hints().as_deref(),
            Some(
                &b"HTTP/1.1 103 Early Hints\r\nlink: </a.css>\r\n\r\n\
                   HTTP/1.1 103 Early Hints\r\nX-SECTION: /page\r\n\r\n"[..]
            )
        );
        assert_eq!(vars.take_early_hints(), None);
    }

    #[test]
    fn transaction_scopes_end_with_the_transaction() {
        let vars = Vars::default();
        vars.set("txn.a", Sample::Int(1));
        vars.set("req.b", Sample::Int(2));
        vars.set("sess.c", Sample::Int(3));
        vars.set("txn.a", Sample::Int(4));
        assert_eq!(vars.get("txn.a"), Some(Sample::Int(4)));
        vars.end_transaction();
        assert_eq!(vars.get("txn.a"), None);
        assert_eq!(vars.get("req.b"), None);
        assert_eq!(vars.get("sess.c"), Some(Sample::Int(3)));
        vars.unset("sess.c");
        assert_eq!(vars.get("sess.c"), None);
    }

    #[test]
    fn a_transaction_keeps_its_number_until_it_ends() {
        let vars = Vars::default();
        let next = std::cell::Cell::new(7u64);
        let take = || next.replace(next.get() + 1);
        assert_eq!(vars.stream_number(take), 7);
        // Asked again (a log line after a unique id): the same number, none taken.
        assert_eq!(vars.stream_number(take), 7);
        assert_eq!(next.get(), 8);
        vars.end_transaction();
        assert_eq!(vars.stream_number(take), 8);
        // Number 0 is a number like the others; numbers wrap at 32 bits, as HAProxy's.
        let first = Vars::default();
        assert_eq!(first.stream_number(|| 0), 0);
        assert_eq!(first.stream_number(|| 99), 0);
        let wrapped = Vars::default();
        assert_eq!(wrapped.stream_number(|| u64::from(u32::MAX) + 5), 5);
    }

    #[test]
    fn the_last_final_rule_is_the_latest_noted_until_the_transaction_ends() {
        // As a configuration reading it makes it.
        sluice_sample::Expr::parse("last_rule_line", &sluice_sample::MapStore::new())
            .expect("a known fetch");
        let vars = Vars::default();
        assert_eq!(vars.last_rule(), None);
        let file: Arc<str> = Arc::from("a.cfg");
        vars.note_final_rule(&Span::new(&file, 12));
        vars.note_final_rule(&Span::new(&file, 30));
        assert_eq!(vars.last_rule(), Some((Arc::clone(&file), 30)));
        // Reading leaves it in place.
        assert_eq!(vars.last_rule(), Some((Arc::clone(&file), 30)));
        vars.end_transaction();
        assert_eq!(vars.last_rule(), None);
    }

    #[test]
    fn a_slot_is_reused_by_the_next_transaction() {
        let vars = Vars::default();
        vars.set("txn.a", Sample::str(b"first value"));
        vars.end_transaction();
        assert_eq!(vars.get("txn.a"), None);
        vars.set("txn.a", Sample::str(b"second"));
        assert_eq!(vars.get("txn.a"), Some(Sample::str(b"second")));
        vars.set("txn.a", Sample::Bin(Cow::Borrowed(b"bin")));
        assert_eq!(vars.get("txn.a"), Some(Sample::Bin(Cow::Borrowed(b"bin"))));
        vars.set("txn.a", Sample::Int(5));
        assert_eq!(vars.get("txn.a"), Some(Sample::Int(5)));
        vars.unset("txn.a");
        assert_eq!(vars.get("txn.a"), None);
        assert_eq!(vars.entries.borrow().len(), 1, "one slot for one name");
        // A large value is not kept once unset.
        vars.set("txn.a", Sample::str(&[b'x'; 4096]));
        vars.end_transaction();
        assert!(matches!(vars.entries.borrow()[0].value, Sample::Bool(_)));
    }

    #[test]
    fn process_scope_is_shared_between_sessions() {
        let (one, two) = (Vars::default(), Vars::default());
        one.set("proc.shared_by_sessions", Sample::str(b"x"));
        assert_eq!(
            two.get("proc.shared_by_sessions"),
            Some(Sample::str(b"x").into_owned())
        );
        two.unset("proc.shared_by_sessions");
        assert_eq!(one.get("proc.shared_by_sessions"), None);
    }
}
