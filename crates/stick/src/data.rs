//! The data a stick-table entry may store (configuration.txt §4.2 `stick-table ... store`):
//! counters (`conn_cnt`, `gpc0`...), rates over a period (`conn_rate(10s)`...), tags
//! (`gpt0`), the arrays of general-purpose counters, rates and tags (`gpc(N)`,
//! `gpc_rate(N,period)`, `gpt(N)`) and the server of a persistent client (`server_id`).
//!
//! An array stores one value per element ([`DataType::Gpc`] with its index...). A table
//! stores either the legacy `gpc0`/`gpc1`/`gpt0` or the array of the same family, never
//! both; with the array, what names the legacy ones (`sc_inc_gpc0`, `sc-set-gpt0`...) works
//! on its first elements ([`Layout::slot`]), as in HAProxy.
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
    /// `http_fail_cnt`: responses that failed (invalid, or a server's 5xx but 501 and 505).
    HttpFailCnt,
    /// `http_fail_rate(period)`: their rate.
    HttpFailRate,
    /// `gpt(N)`: element `i` of the array of tags (`sc-set-gpt(i,...)`).
    Gpt(u8),
    /// `gpc(N)`: element `i` of the array of counters (`sc-inc-gpc(i,...)`).
    Gpc(u8),
    /// `gpc_rate(N,period)`: the rate of increments of counter `i`.
    GpcRate(u8),
}

/// The largest number of elements of an array type (`gpc(100)`), as in HAProxy.
pub const MAX_ARRAY_LEN: u8 = 100;

/// A general-purpose counter as a rule or fetch names it: a legacy one (`sc-inc-gpc0`,
/// `sc_clr_gpc1`), which a table storing the array finds among its elements, or an element
/// of the array (`sc-inc-gpc(2,...)`), which only the array holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Gpc {
    /// `gpc0` (0) or `gpc1` (1).
    Legacy(u8),
    /// Element `i` of `gpc(N)` (an index past the array names nothing).
    Element(u8),
}

impl Gpc {
    /// The counter and its rate.
    pub fn types(self) -> (DataType, DataType) {
        match self {
            Gpc::Legacy(0) => (DataType::Gpc0, DataType::Gpc0Rate),
            Gpc::Legacy(_) => (DataType::Gpc1, DataType::Gpc1Rate),
            Gpc::Element(i) => (DataType::Gpc(i), DataType::GpcRate(i)),
        }
    }
}

/// An array index as rules and fetches write it (`sc-inc-gpc(<idx>,...)`): one past the
/// largest array's last element names nothing, as a larger or negative index does in
/// HAProxy.
pub fn array_index(text: &str) -> Result<u8, String> {
    let index = text
        .trim()
        .parse::<i64>()
        .map_err(|_| format!("invalid array index '{text}'"))?;
    Ok(u8::try_from(index)
        .ok()
        .filter(|&i| i < MAX_ARRAY_LEN)
        .unwrap_or(MAX_ARRAY_LEN))
}

/// A family of array types, as `store` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrayType {
    /// `gpt(N)`.
    Gpt,
    /// `gpc(N)`.
    Gpc,
    /// `gpc_rate(N,period)`.
    GpcRate,
}

impl ArrayType {
    /// The family named `name` (`gpc`, `gpc_rate`, `gpt`).
    pub fn from_name(name: &str) -> Option<ArrayType> {
        match name {
            "gpt" => Some(ArrayType::Gpt),
            "gpc" => Some(ArrayType::Gpc),
            "gpc_rate" => Some(ArrayType::GpcRate),
            _ => None,
        }
    }

    /// Element `index` of the array.
    pub fn element(self, index: u8) -> DataType {
        match self {
            ArrayType::Gpt => DataType::Gpt(index),
            ArrayType::Gpc => DataType::Gpc(index),
            ArrayType::GpcRate => DataType::GpcRate(index),
        }
    }

    /// The legacy types the array replaces (a table may not store both).
    pub fn legacy(self) -> &'static [DataType] {
        match self {
            ArrayType::Gpt => &[DataType::Gpt0],
            ArrayType::Gpc => &[DataType::Gpc0, DataType::Gpc1],
            ArrayType::GpcRate => &[DataType::Gpc0Rate, DataType::Gpc1Rate],
        }
    }
}

impl DataType {
    /// Every type but the arrays' elements, in `show table` order.
    pub const ALL: [DataType; 22] = [
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
        DataType::HttpFailCnt,
        DataType::HttpFailRate,
    ];

    /// The name `store` and `data.<name>` use (an array's element: the array's name).
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
            DataType::HttpFailCnt => "http_fail_cnt",
            DataType::HttpFailRate => "http_fail_rate",
            DataType::Gpt(_) => "gpt",
            DataType::Gpc(_) => "gpc",
            DataType::GpcRate(_) => "gpc_rate",
        }
    }

    /// The name `show table` prints: an array's element is numbered as a legacy type is
    /// (`gpc2`, `gpc2_rate`), as in HAProxy.
    pub fn label(self) -> std::borrow::Cow<'static, str> {
        match self {
            DataType::Gpt(i) => format!("gpt{i}").into(),
            DataType::Gpc(i) => format!("gpc{i}").into(),
            DataType::GpcRate(i) => format!("gpc{i}_rate").into(),
            other => other.name().into(),
        }
    }

    /// The type named `name`; an array's name gives its first element (`data.gpc` of the
    /// CLI, as in HAProxy).
    pub fn from_name(name: &str) -> Option<DataType> {
        DataType::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .or_else(|| ArrayType::from_name(name).map(|array| array.element(0)))
    }

    /// What stands for this legacy type in a table storing the array instead (`gpc0` is
    /// `gpc(N)`'s element 0), if it has one.
    fn array_alias(self) -> Option<DataType> {
        match self {
            DataType::Gpt0 => Some(DataType::Gpt(0)),
            DataType::Gpc0 => Some(DataType::Gpc(0)),
            DataType::Gpc1 => Some(DataType::Gpc(1)),
            DataType::Gpc0Rate => Some(DataType::GpcRate(0)),
            DataType::Gpc1Rate => Some(DataType::GpcRate(1)),
            _ => None,
        }
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
                | DataType::HttpFailRate
                | DataType::GpcRate(_)
        )
    }

    /// The data types of HAProxy that Sluice does not store (refused as "not supported").
    pub fn is_known_unsupported(name: &str) -> bool {
        matches!(name, "server_name" | "glitch_cnt" | "glitch_rate")
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
    /// Adds `data` (with `period` for a rate). Errors on a type stored twice, and on a
    /// legacy type stored with the array that replaces it.
    pub fn add(&mut self, data: DataType, period: u64) -> Result<(), String> {
        if self.stored.iter().any(|(t, _)| *t == data) {
            return Err(format!("data type '{}' is stored twice", data.name()));
        }
        let clash = self.stored.iter().find(|(t, _)| {
            t.array_alias().is_some_and(|a| a.name() == data.name())
                || data.array_alias().is_some_and(|a| a.name() == t.name())
        });
        if let Some((other, _)) = clash {
            return Err(format!(
                "'{}' and '{}' may not be stored in the same table (the array replaces the legacy type)",
                data.name(),
                other.name()
            ));
        }
        self.stored.push((data, period));
        self.stored.sort_by_key(|(t, _)| *t);
        Ok(())
    }

    /// Adds the `len` elements of `array` (with `period` for rates). Errors as
    /// [`Layout::add`] does, and on a length outside 1 to [`MAX_ARRAY_LEN`].
    pub fn add_array(&mut self, array: ArrayType, len: u64, period: u64) -> Result<(), String> {
        let name = array.element(0).name();
        let len = u8::try_from(len)
            .ok()
            .filter(|n| (1..=MAX_ARRAY_LEN).contains(n))
            .ok_or_else(|| {
                format!("'{name}' expects between 1 and {MAX_ARRAY_LEN} elements, not {len}")
            })?;
        (0..len).try_for_each(|i| self.add(array.element(i), period))
    }

    /// True if the table stores a type named `name` (`conn_cnt`; `gpc` for the array).
    pub fn stores(&self, name: &str) -> bool {
        self.stored.iter().any(|(t, _)| t.name() == name)
    }

    /// The stored types and their periods, in `show table` order.
    pub fn stored(&self) -> &[(DataType, u64)] {
        &self.stored
    }

    /// The slot of `data` in an entry and its period, if the table stores it (a legacy
    /// `gpc0`, `gpc1`, their rates and `gpt0`: or the array element that replaces it).
    pub fn slot(&self, data: DataType) -> Option<(usize, u64)> {
        self.exact_slot(data)
            .or_else(|| self.exact_slot(data.array_alias()?))
    }

    fn exact_slot(&self, data: DataType) -> Option<(usize, u64)> {
        self.stored
            .iter()
            .position(|(t, _)| *t == data)
            .map(|i| (i, self.stored[i].1))
    }

    /// True if the table stores `data` (or the array element that replaces it).
    pub fn has(&self, data: DataType) -> bool {
        self.slot(data).is_some()
    }

    /// True if the table stores `data` itself, not an array element in its place (the
    /// CLI's `data.gpc0` of a table storing `gpc(N)` names nothing, as in HAProxy).
    pub fn has_exactly(&self, data: DataType) -> bool {
        self.exact_slot(data).is_some()
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Increments `gpc1` as `sc-inc-gpc1` does; its value after.
    fn data(layout: &Layout, values: &mut [Value]) -> u64 {
        let mut d = Data {
            layout,
            values,
            now: 0,
        };
        let (counter, rate) = Gpc::Legacy(1).types();
        d.count(counter, rate, 1);
        d.get(counter).unwrap_or(u64::MAX)
    }

    #[test]
    fn the_legacy_counters_are_the_first_elements_of_the_array() {
        let mut layout = Layout::default();
        layout.add_array(ArrayType::Gpc, 3, 0).unwrap();
        layout.add_array(ArrayType::Gpt, 1, 0).unwrap();
        let mut values = layout.fresh();
        // `gpc1` is `gpc(3)`'s element 1.
        assert_eq!(data(&layout, &mut values), 1);
        let mut d = Data {
            layout: &layout,
            values: &mut values,
            now: 0,
        };
        assert_eq!(d.get(DataType::Gpc(1)), Some(1));
        assert!(d.set(DataType::Gpt0, 7));
        assert_eq!(d.get(DataType::Gpt(0)), Some(7));
        // Past the array: nothing.
        assert_eq!(d.get(DataType::Gpc(3)), None);
        assert!(layout.has(DataType::Gpc0));
        assert!(!layout.has_exactly(DataType::Gpc0));
        assert!(layout.stores("gpc"));
    }

    #[test]
    fn an_array_element_never_stands_for_a_legacy_counter() {
        let mut layout = Layout::default();
        layout.add(DataType::Gpc0, 0).unwrap();
        assert!(!layout.has(DataType::Gpc(0)));
        assert!(layout.add_array(ArrayType::Gpc, 1, 0).is_err());
        // The rates are a family apart.
        layout.add_array(ArrayType::GpcRate, 2, 1_000).unwrap();
        assert_eq!(
            layout.slot(DataType::Gpc0Rate),
            layout.slot(DataType::GpcRate(0))
        );
    }

    #[test]
    fn show_table_numbers_the_elements() {
        assert_eq!(DataType::Gpc(2).label(), "gpc2");
        assert_eq!(DataType::GpcRate(0).label(), "gpc0_rate");
        assert_eq!(DataType::Gpt(1).label(), "gpt1");
        assert_eq!(DataType::HttpFailCnt.label(), "http_fail_cnt");
        assert_eq!(DataType::from_name("gpc"), Some(DataType::Gpc(0)));
        assert!(DataType::Gpt(0) > DataType::HttpFailRate);
        assert!(DataType::Gpc(0) > DataType::Gpt(99));
    }

    #[test]
    fn array_indexes_out_of_range_name_nothing() {
        assert_eq!(array_index("7"), Ok(7));
        assert_eq!(array_index("100"), Ok(MAX_ARRAY_LEN));
        assert_eq!(array_index("-1"), Ok(MAX_ARRAY_LEN));
        assert!(array_index("x").is_err());
    }
}
