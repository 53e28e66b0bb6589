//! `balance first` (configuration.txt §4.2 "balance"): "The first server with available
//! connection slots receives the connection. The servers are chosen from the lowest numeric
//! identifier to the highest", and once one reaches its `maxconn` the next one is used. Weights
//! are ignored (but a weight of 0 still takes a server out, as for every algorithm). Without
//! `maxconn` the first server takes everything, which is what the manual warns about.
//!
//! The servers are laid out once in id order; a bitset marks those that are members with a free
//! slot. The [`Balancer`](crate::Balancer) flips a server's bit on events and on
//! `connection_started`/`connection_ended`; a pick finds the lowest set bit, one 64-bit word at a
//! time, with no allocation.

/// The first-fit selector of one tier (active or backup servers).
#[derive(Clone, Debug)]
pub(crate) struct FirstFit {
    /// Position → server, in (id, index) order.
    order: Vec<u32>,
    /// Server → position.
    rank: Vec<u32>,
    /// Whether each server is a member of this tier.
    member: Vec<bool>,
    /// One bit per position: a member with a free slot.
    free: Vec<u64>,
}

impl FirstFit {
    /// A selector for servers with the given ids (`ids[i]` is server `i`'s id).
    pub(crate) fn new(ids: &[u32]) -> Self {
        let mut order: Vec<u32> = (0..ids.len() as u32).collect();
        order.sort_by_key(|&s| (ids[s as usize], s));
        let mut rank = vec![0u32; ids.len()];
        for (position, &server) in order.iter().enumerate() {
            rank[server as usize] = position as u32;
        }
        FirstFit {
            order,
            rank,
            member: vec![false; ids.len()],
            free: vec![0; ids.len().div_ceil(64)],
        }
    }

    /// Makes `server` a member (weight > 0) or not, with whether it is below its `maxconn`.
    pub(crate) fn set_member(&mut self, server: usize, member: bool, room: bool) {
        if let Some(m) = self.member.get_mut(server) {
            *m = member;
            self.set_room(server, room);
        }
    }

    /// Updates `server`'s bit after its connection count or `maxconn` changed.
    pub(crate) fn set_room(&mut self, server: usize, room: bool) {
        let Some(&position) = self.rank.get(server) else {
            return;
        };
        let (word, bit) = (position as usize / 64, position % 64);
        let Some(w) = self.free.get_mut(word) else {
            return;
        };
        if room && self.member[server] {
            *w |= 1 << bit;
        } else {
            *w &= !(1 << bit);
        }
    }

    /// The first member by id with a free slot, other than `avoid` unless it is the only one;
    /// `None` when every member is full or there is none.
    pub(crate) fn pick(&self, avoid: Option<usize>) -> Option<usize> {
        let mut fallback = None;
        for (word_at, &word) in self.free.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let position = word_at * 64 + bits.trailing_zeros() as usize;
                let server = self.order.get(position).map(|&s| s as usize)?;
                if Some(server) != avoid {
                    return Some(server);
                }
                fallback = Some(server);
                bits &= bits - 1;
            }
        }
        fallback
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn lowest_id_with_room_first() {
        let mut first = FirstFit::new(&[3, 1, 2]);
        for s in 0..3 {
            first.set_member(s, true, true);
        }
        assert_eq!(first.pick(None), Some(1));
        first.set_room(1, false);
        assert_eq!(first.pick(None), Some(2));
        assert_eq!(first.pick(Some(2)), Some(0));
        first.set_room(2, false);
        first.set_room(0, false);
        assert_eq!(first.pick(None), None);
        first.set_room(1, true);
        assert_eq!(first.pick(Some(1)), Some(1));
        first.set_member(1, false, true);
        assert_eq!(first.pick(None), None);
    }

    #[test]
    fn many_servers_span_words() {
        let ids: Vec<u32> = (1..=200).collect();
        let mut first = FirstFit::new(&ids);
        for s in 0..200 {
            first.set_member(s, true, s >= 150);
        }
        assert_eq!(first.pick(None), Some(150));
        first.set_room(63, true);
        assert_eq!(first.pick(None), Some(63));
        assert_eq!(first.pick(Some(63)), Some(150));
        first.set_room(999, true);
        first.set_member(999, true, true);
    }
}
