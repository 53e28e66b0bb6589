//! The data a stick-table entry may store (configuration.txt §4.2 `stick-table ... store`):
//! counters (`conn_cnt`, `gpc0`...), rates over a period (`conn_rate(10s)`...), tags
//! (`gpt0`) and the server of a persistent client (`server_id`).
//!
//! A table stores only the types its `store` list names; [`Layout`] maps each stored type
//! to a slot of the entry's value array, so an entry costs one small array and a fetch of a
//! type the table does not store answers "no sample", as in HAProxy. [`DataType`]'s order is
//! the order `show table` prints the values in.

use crate::freq::FreqCtr;

/// A type of data a stick table can store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DataType {
    /// `server_id`: the server a persistent client sticks to (`stick` rules).
    ServerId,
    /// `gpt0`: a tag rules set (`sc-set-gpt0`).
    Gpt0,
    /// `gpc0`: a counter rules increment (`sc-inc-gpc0`, `sc_inc_gpc0`).
    Gpc0,
    /// `gpc0_rate(period)`: the rate of `gpc0` increments.
    Gpc0Rate,
    /// `conn_cnt`: connections tracked with this key.
    ConnCnt,
    /// `conn_rate(period)`: their rate.
    ConnRate,
    /// `conn_cur`: streams tracking the entry now.
    ConnCur,
    /// `sess_cnt`: sessions accepted with this key.
    SessCnt,
    /// `sess_rate(period)`: their rate.
    SessRate,
    /// `http_req_cnt`: HTTP requests.
    HttpReqCnt,
    /// `http_req_rate(period)`: their rate.
    HttpReqRate,
    /// `http_err_cnt`: HTTP requests that ended in an error (denied, or a 4xx from a server).
    HttpErrCnt,
    /// `http_err_rate(period)`: their rate.
    HttpErrRate,
    /// `bytes_in_cnt`: bytes received from the client.
    BytesInCnt,
    /// `bytes_in_rate(period)`: their rate.
    BytesInRate,
    /// `bytes_out_cnt`: bytes sent to the client.
    BytesOutCnt,
    /// `bytes_out_rate(period)`: their rate.
    BytesOutRate,
    /// `gpc1`: a second general-purpose counter.
    Gpc1,
    /// `gpc1_rate(period)`: the rate of `gpc1` increments.
    Gpc1Rate,
    /// `server_key`: the name of the server of `server_id`, stored with it by `stick` rules.
    ServerKey,
}

impl DataType {
    /// Every type, in `show table` order.
    pub const ALL: [DataType; 20] = [
        DataType::ServerId,
        DataType::Gpt0,
        DataType::Gpc0,
        DataType::Gpc0Rate,
        DataType::ConnCnt,
        DataType::ConnRate,
        DataType::ConnCur,
        DataType::SessCnt,
        DataType::SessRate,
        DataType::HttpReqCnt,
        DataType::HttpReqRate,
        DataType::HttpErrCnt,
        DataType::HttpErrRate,
        DataType::BytesInCnt,
        DataType::BytesInRate,
        DataType::BytesOutCnt,
        DataType::BytesOutRate,
        DataType::Gpc1,
        DataType::Gpc1Rate,
        DataType::ServerKey,
    ];

    /// The name `store`, `show table` and `data.<name>` use.
    pub fn name(self) -> &'static str {
        match self {
            DataType::ServerId => "server_id",
            DataType::Gpt0 => "gpt0",
            DataType::Gpc0 => "gpc0",
            DataType::Gpc0Rate => "gpc0_rate",
            DataType::ConnCnt => "conn_cnt",
            DataType::ConnRate => "conn_rate",
            DataType::ConnCur => "conn_cur",
            DataType::SessCnt => "sess_cnt",
            DataType::SessRate => "sess_rate",
            DataType::HttpReqCnt => "http_req_cnt",
            DataType::HttpReqRate => "http_req_rate",
            DataType::HttpErrCnt => "http_err_cnt",
            DataType::HttpErrRate => "http_err_rate",
            DataType::BytesInCnt => "bytes_in_cnt",
            DataType::BytesInRate => "bytes_in_rate",
            DataType::BytesOutCnt => "bytes_out_cnt",
            DataType::BytesOutRate => "bytes_out_rate",
            DataType::Gpc1 => "gpc1",
            DataType::Gpc1Rate => "gpc1_rate",
            DataType::ServerKey => "server_key",
        }
    }

    /// The type named `name`.
    pub fn from_name(name: &str) -> Option<DataType> {
        DataType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// True for rates, which take a period.
    pub fn is_rate(self) -> bool {
        matches!(
            self,
            DataType::Gpc0Rate
                | DataType::ConnRate
                | DataType::SessRate
                | DataType::HttpReqRate
                | DataType::HttpErrRate
                | DataType::BytesInRate
                | DataType::BytesOutRate
                | DataType::Gpc1Rate
        )
    }

    /// The data types of HAProxy 2.6 that Sluice does not store (refused as "not supported").
    pub fn is_known_unsupported(name: &str) -> bool {
        matches!(
            name,
            "server_name" | "http_fail_cnt" | "http_fail_rate" | "gpt" | "gpc" | "gpc_rate"
        )
    }
}

/// One stored value of an entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// A counter or tag.
    Num(u64),
    /// A rate.
    Rate(FreqCtr),
    /// A name (`server_key`).
    Text(Option<Box<str>>),
}

/// Which types a table stores, where each sits in an entry, and the rates' periods.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// Stored types with their period in milliseconds (0 for non-rates), in `show table`
    /// order.
    stored: Vec<(DataType, u64)>,
}

impl Layout {
    /// Adds `data` (with `period` for a rate). Errors on a type stored twice.
    pub fn add(&mut self, data: DataType, period: u64) -> Result<(), String> {
        if self.stored.iter().any(|(t, _)| *t == data) {
            return Err(format!("data type '{}' is stored twice", data.name()));
        }
        self.stored.push((data, period));
        self.stored.sort_by_key(|(t, _)| *t);
        Ok(())
    }

    /// The stored types and their periods, in `show table` order.
    pub fn stored(&self) -> &[(DataType, u64)] {
        &self.stored
    }

    /// The slot of `data` in an entry and its period, if the table stores it.
    pub fn slot(&self, data: DataType) -> Option<(usize, u64)> {
        self.stored
            .iter()
            .position(|(t, _)| *t == data)
            .map(|i| (i, self.stored[i].1))
    }

    /// True if the table stores `data`.
    pub fn has(&self, data: DataType) -> bool {
        self.slot(data).is_some()
    }

    /// Fresh values for a new entry.
    pub(crate) fn fresh(&self) -> Box<[Value]> {
        self.stored
            .iter()
            .map(|(t, _)| {
                if t.is_rate() {
                    Value::Rate(FreqCtr::default())
                } else if *t == DataType::ServerKey {
                    Value::Text(None)
                } else {
                    Value::Num(0)
                }
            })
            .collect()
    }
}

/// The values of one entry, seen through the table's layout at a moment `now`.
pub struct Data<'a> {
    pub(crate) layout: &'a Layout,
    pub(crate) values: &'a mut [Value],
    pub(crate) now: u64,
}

impl Data<'_> {
    /// The value of `data` (a rate read at `now`), `None` if the table does not store it.
    pub fn get(&self, data: DataType) -> Option<u64> {
        let (slot, period) = self.layout.slot(data)?;
        Some(match self.values.get(slot)? {
            Value::Num(n) => *n,
            Value::Rate(f) => f.read(self.now, period),
            Value::Text(_) => return None,
        })
    }

    /// The name stored as `data` (`server_key`), if the table stores it and it is set.
    pub fn text(&self, data: DataType) -> Option<&str> {
        let (slot, _) = self.layout.slot(data)?;
        match self.values.get(slot)? {
            Value::Text(text) => text.as_deref(),
            _ => None,
        }
    }

    /// Stores the name `text` as `data` if the table stores it.
    pub fn set_text(&mut self, data: DataType, text: &str) {
        if let Some((slot, _)) = self.layout.slot(data)
            && let Some(Value::Text(value)) = self.values.get_mut(slot)
            && value.as_deref() != Some(text)
        {
            *value = Some(text.into());
        }
    }

    /// Adds `n` to `data` (an event count for a rate) if the table stores it.
    pub fn add(&mut self, data: DataType, n: u64) {
        let Some((slot, period)) = self.layout.slot(data) else {
            return;
        };
        match self.values.get_mut(slot) {
            Some(Value::Num(v)) => *v = v.saturating_add(n),
            Some(Value::Rate(f)) => f.add(self.now, period, n),
            Some(Value::Text(_)) | None => {}
        }
    }

    /// Subtracts one from the counter `data` (never below zero).
    pub fn decrement(&mut self, data: DataType) {
        if let Some((slot, _)) = self.layout.slot(data)
            && let Some(Value::Num(v)) = self.values.get_mut(slot)
        {
            *v = v.saturating_sub(1);
        }
    }

    /// Sets `data` to `value` (a rate restarts with `value` events now); false if the table
    /// does not store it.
    pub fn set(&mut self, data: DataType, value: u64) -> bool {
        let Some((slot, _)) = self.layout.slot(data) else {
            return false;
        };
        match self.values.get_mut(slot) {
            Some(Value::Num(v)) => *v = value,
            Some(Value::Rate(f)) => f.set(self.now, value),
            Some(Value::Text(_)) | None => return false,
        }
        true
    }

    /// Counts one event on a counter and its rate (`conn_cnt` and `conn_rate`...).
    pub fn count(&mut self, counter: DataType, rate: DataType, n: u64) {
        self.add(counter, n);
        self.add(rate, n);
    }
}
