//! What a stream captured for its log (configuration.txt §4.2 `capture request|response
//! header`, `declare capture`, `http-request|http-response capture`; §8.2.3 "{...}" fields).
//!
//! A frontend declares numbered slots for requests and for responses; each transaction
//! fills them (a header's first occurrence, or a rule's sample), cut to the slot's length.
//! [`CaptureSet`] holds one transaction's values; the log line (`%hr`, `%hs`, the `{a|b}`
//! fields of `option httplog`) and the `capture.req.hdr`/`capture.res.hdr` fetches read it.
//! A set with no slot (a request that could not be parsed) prints nothing, as in HAProxy.

/// The captured values of one transaction, by slot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaptureSet {
    request: Vec<Option<Vec<u8>>>,
    response: Vec<Option<Vec<u8>>>,
    /// `capture cookie`: the request's and the response's.
    cookies: [Option<Vec<u8>>; 2],
}

impl CaptureSet {
    /// A set with no slot.
    pub const EMPTY: CaptureSet = CaptureSet {
        request: Vec::new(),
        response: Vec::new(),
        cookies: [None, None],
    };

    /// Empties the set and gives it `request` and `response` empty slots.
    pub fn reset(&mut self, request: usize, response: usize) {
        self.request.clear();
        self.request.resize(request, None);
        self.response.clear();
        self.response.resize(response, None);
        self.cookies = [None, None];
    }

    /// Keeps the captured cookie (`name=value`, cut to `max_len` bytes) of the request or
    /// of the response.
    pub fn store_cookie(&mut self, response: bool, cookie: &[u8], max_len: usize) {
        self.cookies[usize::from(response)] = Some(truncated(cookie, max_len).to_vec());
    }

    /// The captured cookie of the request or of the response.
    pub fn cookie(&self, response: bool) -> Option<&[u8]> {
        self.cookies[usize::from(response)].as_deref()
    }

    /// Stores `value`, cut to `max_len` bytes, in slot `index`; an unknown slot is ignored.
    pub fn store(&mut self, response: bool, index: usize, value: &[u8], max_len: usize) {
        let slots = if response {
            &mut self.response
        } else {
            &mut self.request
        };
        if let Some(slot) = slots.get_mut(index) {
            *slot = Some(truncated(value, max_len).to_vec());
        }
    }

    /// True if slot `index` holds a value already (a header is captured at its first
    /// occurrence).
    pub fn is_set(&self, response: bool, index: usize) -> bool {
        self.get(response, index).is_some()
    }

    /// The number of slots.
    pub fn count(&self, response: bool) -> usize {
        if response {
            self.response.len()
        } else {
            self.request.len()
        }
    }

    /// The value of slot `index`; `None` when nothing was captured there.
    pub fn get(&self, response: bool, index: usize) -> Option<&[u8]> {
        let slots = if response {
            &self.response
        } else {
            &self.request
        };
        slots.get(index)?.as_deref()
    }
}

/// The first `max_len` bytes of `value`.
fn truncated(value: &[u8], max_len: usize) -> &[u8] {
    &value[..value.len().min(max_len)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_cut_to_the_slot_length() {
        let mut set = CaptureSet::default();
        set.reset(2, 1);
        set.store(false, 0, b"www.example.com", 5);
        set.store(false, 1, b"ab", 10);
        set.store(true, 0, b"", 3);
        set.store(true, 7, b"ignored", 3);
        assert_eq!(set.get(false, 0), Some(&b"www.e"[..]));
        assert_eq!(set.get(false, 1), Some(&b"ab"[..]));
        assert_eq!(set.get(true, 0), Some(&b""[..]));
        assert_eq!(set.get(true, 7), None);
        assert_eq!((set.count(false), set.count(true)), (2, 1));
        assert!(set.is_set(false, 1));
        set.reset(1, 0);
        assert_eq!(set.get(false, 0), None);
        assert_eq!(set.count(true), 0);
        assert_eq!(truncated(b"abc", 0), b"");
    }
}
