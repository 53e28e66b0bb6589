//! Indexes over compiled patterns (issue #4: "maps indexed"), so that a map or an ACL with
//! thousands of values answers in time bounded by the input, not by the number of lines.
//! [`PatternIndex`] holds, for `ip`, a binary trie per address family answering the
//! longest-prefix match in at most 32 or 128 steps, plus the IPv4 networks written with a
//! non-contiguous dotted mask, which no trie can hold and which are kept in file order; for
//! `beg`, `end`, `dom` and `dir`, byte tries (one exact, one for `-i` patterns, stored lower
//! cased) walked along the input. Every entry carries its line number (`id`) and lookups
//! return the id the linear scan of the manual would pick: for `ip` HAProxy's order (the
//! sample's own family first, longest prefix, then the other family through the mapped
//! address, then the non-contiguous masks in file order), for the string methods the
//! *smallest* id among matching patterns, i.e. the first matching line, because
//! configuration.txt §7.3.1 (`map`) stores only addresses and exact strings in trees ("the
//! first of the finest match") and every other method in lists ("the first matching
//! occurrence"). Lookups never allocate. `sub`, `reg`, `int`, `len` and `bin` have no index.

use std::net::IpAddr;

use super::{IpPattern, MatchMethod, Pattern, Prepared, is_dir_delim, is_dom_delim};
use crate::value::embedded_v4;

/// "No node" / "no entry": `u32::MAX` is never a valid id or node (both are checked when
/// inserting), and being the largest value it also loses every `min`.
const NONE: u32 = u32::MAX;

/// A node of a [`BitTrie`].
#[derive(Clone, Copy, Debug)]
struct BitNode {
    child: [u32; 2],
    entry: u32,
}

const EMPTY_BIT_NODE: BitNode = BitNode {
    child: [NONE; 2],
    entry: NONE,
};

/// A binary trie over the bits of a left-aligned 128-bit key (IPv4 addresses are shifted
/// into the top 32 bits). Node 0 is the root and holds the `/0` network.
#[derive(Clone, Debug, Default)]
struct BitTrie {
    nodes: Vec<BitNode>,
}

fn bit(key: u128, i: u32) -> usize {
    usize::from(key.checked_shr(127 - i.min(127)).unwrap_or(0) & 1 == 1)
}

impl BitTrie {
    /// Adds the network of the first `len` bits of `key`; false when the trie is full.
    fn insert(&mut self, key: u128, len: u32, id: u32) -> bool {
        if self.nodes.is_empty() {
            self.nodes.push(EMPTY_BIT_NODE);
        }
        let mut n = 0usize;
        for i in 0..len.min(128) {
            let b = bit(key, i);
            let next = self.nodes[n].child[b];
            n = if next == NONE {
                let Ok(new) = u32::try_from(self.nodes.len()) else {
                    return false;
                };
                if new == NONE {
                    return false;
                }
                self.nodes.push(EMPTY_BIT_NODE);
                self.nodes[n].child[b] = new;
                new as usize
            } else {
                next as usize
            };
        }
        // The same network on several lines: the first line wins.
        let entry = &mut self.nodes[n].entry;
        *entry = (*entry).min(id);
        true
    }

    /// The entry of the longest network containing `key`, looking at its first `bits` bits.
    fn longest(&self, key: u128, bits: u32) -> Option<u32> {
        let mut node = self.nodes.first()?;
        let mut best = NONE;
        for i in 0..=bits {
            if node.entry != NONE {
                best = node.entry;
            }
            if i == bits {
                break;
            }
            match self.nodes.get(node.child[bit(key, i)] as usize) {
                Some(next) => node = next,
                None => break,
            }
        }
        (best != NONE).then_some(best)
    }
}

/// The `ip` index.
#[derive(Clone, Debug, Default)]
pub(crate) struct IpIndex {
    v4: BitTrie,
    v6: BitTrie,
    /// IPv4 networks with a non-contiguous mask (`10.0.255.0/255.0.255.0`), in file order.
    masked: Vec<(u32, u32, u32)>,
}

/// Whether an IPv4 mask is a prefix (ones then zeros), as HAProxy requires to put a
/// network in its tree.
fn contiguous(mask: u32) -> bool {
    mask.leading_ones() == mask.count_ones()
}

impl IpIndex {
    fn insert(&mut self, net: IpPattern, id: u32) -> bool {
        match net {
            IpPattern::V4 { addr, mask } if contiguous(mask) => {
                self.v4
                    .insert(u128::from(addr) << 96, mask.count_ones(), id)
            }
            IpPattern::V4 { addr, mask } => {
                self.masked.push((addr, mask, id));
                true
            }
            IpPattern::V6 { addr, mask } => self.v6.insert(addr, mask.count_ones(), id),
        }
    }

    /// HAProxy's `pat_match_ip` order: the tree of the sample's family, then the other tree
    /// (an IPv4 sample as `::ffff:a.b.c.d`, an IPv6 sample through the IPv4 address it
    /// embeds), then the non-contiguous networks in file order.
    fn find(&self, ip: IpAddr) -> Option<u32> {
        let v4 = match ip {
            IpAddr::V4(a) => Some(a),
            IpAddr::V6(a) => embedded_v4(&a),
        };
        let trees = match ip {
            IpAddr::V4(a) => self
                .v4
                .longest(u128::from(u32::from(a)) << 96, 32)
                .or_else(|| self.v6.longest(u128::from(a.to_ipv6_mapped()), 128)),
            IpAddr::V6(a) => self
                .v6
                .longest(u128::from(a), 128)
                .or_else(|| v4.and_then(|v4| self.v4.longest(u128::from(u32::from(v4)) << 96, 32))),
        };
        trees.or_else(|| {
            let v4 = u32::from(v4?);
            self.masked
                .iter()
                .filter(|(addr, mask, _)| v4 & mask == *addr)
                .map(|(_, _, id)| *id)
                .min()
        })
    }
}

/// A node of a [`ByteTrie`]: its edges sorted by byte, and the smallest id of the patterns
/// ending here.
#[derive(Clone, Debug)]
struct ByteNode {
    edges: Vec<(u8, u32)>,
    entry: u32,
}

/// A trie over pattern bytes. Node 0 is the root (the empty pattern).
#[derive(Clone, Debug, Default)]
struct ByteTrie {
    nodes: Vec<ByteNode>,
}

impl ByteTrie {
    /// Adds a pattern; false when the trie is full.
    fn insert(&mut self, bytes: impl Iterator<Item = u8>, id: u32) -> bool {
        if self.nodes.is_empty() {
            self.nodes.push(ByteNode {
                edges: Vec::new(),
                entry: NONE,
            });
        }
        let mut n = 0usize;
        for b in bytes {
            n = match self.nodes[n].edges.binary_search_by_key(&b, |e| e.0) {
                Ok(at) => self.nodes[n].edges[at].1 as usize,
                Err(at) => {
                    let Ok(new) = u32::try_from(self.nodes.len()) else {
                        return false;
                    };
                    if new == NONE {
                        return false;
                    }
                    self.nodes.push(ByteNode {
                        edges: Vec::new(),
                        entry: NONE,
                    });
                    self.nodes[n].edges.insert(at, (b, new));
                    new as usize
                }
            };
        }
        let entry = &mut self.nodes[n].entry;
        *entry = (*entry).min(id);
        true
    }

    fn root(&self) -> Option<&ByteNode> {
        self.nodes.first()
    }

    fn child(&self, node: &ByteNode, b: u8) -> Option<&ByteNode> {
        let at = node.edges.binary_search_by_key(&b, |e| e.0).ok()?;
        self.nodes.get(node.edges.get(at)?.1 as usize)
    }

    /// The smallest entry on the path spelled by `input` (a prefix match), starting with
    /// the root's.
    fn min_on_path(&self, input: impl Iterator<Item = u8>) -> u32 {
        let Some(mut node) = self.root() else {
            return NONE;
        };
        let mut best = node.entry;
        for b in input {
            match self.child(node, b) {
                Some(next) => node = next,
                None => break,
            }
            best = best.min(node.entry);
        }
        best
    }

    /// The smallest entry of the patterns that occur in `s` at `start` and end at the end of
    /// `s` or before a delimiter.
    fn min_word_at(&self, s: &[u8], start: usize, fold: bool, delim: fn(u8) -> bool) -> u32 {
        let Some(mut node) = self.root() else {
            return NONE;
        };
        let mut best = NONE;
        let rest = s.get(start..).unwrap_or_default();
        for (i, &b) in rest.iter().enumerate() {
            let b = if fold { b.to_ascii_lowercase() } else { b };
            match self.child(node, b) {
                Some(next) => node = next,
                None => break,
            }
            if rest.get(i + 1).is_none_or(|&next| delim(next)) {
                best = best.min(node.entry);
            }
        }
        best
    }
}

/// Which walk a [`StrIndex`] does.
#[derive(Clone, Copy, Debug)]
enum StrKind {
    /// `beg`: patterns are prefixes of the input.
    Beg,
    /// `end`: patterns, stored reversed, are suffixes of the input.
    End,
    /// `dom`/`dir`: patterns occur between delimiters (or the ends).
    Word(fn(u8) -> bool),
}

/// The index of a string method: case-sensitive patterns and `-i` patterns (lower cased)
/// in separate tries, since one input is walked once as is and once folded.
#[derive(Clone, Debug)]
pub(crate) struct StrIndex {
    kind: StrKind,
    exact: ByteTrie,
    folded: ByteTrie,
}

impl StrIndex {
    fn insert(&mut self, bytes: &[u8], icase: bool, id: u32) -> bool {
        // An empty word never matches (`match_word`), so it is not a candidate at the root.
        if matches!(self.kind, StrKind::Word(_)) && bytes.is_empty() {
            return true;
        }
        let trie = if icase {
            &mut self.folded
        } else {
            &mut self.exact
        };
        let fold = move |b: &u8| if icase { b.to_ascii_lowercase() } else { *b };
        match self.kind {
            StrKind::End => trie.insert(bytes.iter().rev().map(fold), id),
            StrKind::Beg | StrKind::Word(_) => trie.insert(bytes.iter().map(fold), id),
        }
    }

    fn find(&self, s: &[u8]) -> Option<u32> {
        let lower = |b: &u8| b.to_ascii_lowercase();
        let best = match self.kind {
            StrKind::Beg => self
                .exact
                .min_on_path(s.iter().copied())
                .min(self.folded.min_on_path(s.iter().map(lower))),
            StrKind::End => self
                .exact
                .min_on_path(s.iter().rev().copied())
                .min(self.folded.min_on_path(s.iter().rev().map(lower))),
            StrKind::Word(delim) => {
                let mut best = NONE;
                for start in 0..s.len() {
                    if start == 0 || s.get(start - 1).is_some_and(|&b| delim(b)) {
                        best = best
                            .min(self.exact.min_word_at(s, start, false, delim))
                            .min(self.folded.min_word_at(s, start, true, delim));
                    }
                }
                best
            }
        };
        (best != NONE).then_some(best)
    }
}

/// The index of one pattern list or map, for the methods that have one.
#[derive(Clone, Debug)]
pub(crate) enum PatternIndex {
    Ip(IpIndex),
    Str(StrIndex),
}

impl PatternIndex {
    /// An empty index for `method`; `None` for the methods kept linear: `sub` and `reg`
    /// (a match can start anywhere, so no tree prunes the candidates), `int` and `len`
    /// (ranges, usually few), `bin`, `bool`, `found`, `meth`, and `str` (hashed by the
    /// callers instead).
    pub fn for_method(method: MatchMethod) -> Option<PatternIndex> {
        let kind = match method {
            MatchMethod::Ip => return Some(PatternIndex::Ip(IpIndex::default())),
            MatchMethod::Beg => StrKind::Beg,
            MatchMethod::End => StrKind::End,
            MatchMethod::Dom => StrKind::Word(is_dom_delim),
            MatchMethod::Dir => StrKind::Word(is_dir_delim),
            _ => return None,
        };
        Some(PatternIndex::Str(StrIndex {
            kind,
            exact: ByteTrie::default(),
            folded: ByteTrie::default(),
        }))
    }

    /// Adds `pattern` under `id`; false when it cannot be indexed (a pattern of another
    /// kind, an id of `u32::MAX`, a full trie): the caller then matches it linearly.
    pub fn insert(&mut self, pattern: &Pattern, id: usize) -> bool {
        let Ok(id) = u32::try_from(id) else {
            return false;
        };
        if id == NONE {
            return false;
        }
        match (self, pattern) {
            (PatternIndex::Ip(index), Pattern::Ip(net)) => index.insert(*net, id),
            (PatternIndex::Str(index), Pattern::Bytes { bytes, icase }) => {
                index.insert(bytes, *icase, id)
            }
            _ => false,
        }
    }

    /// The id the linear scan would pick for `sample` (see the module documentation).
    pub fn find(&self, sample: Prepared<'_>) -> Option<usize> {
        let id = match (self, sample) {
            (PatternIndex::Ip(index), Prepared::Ip(ip)) => index.find(ip),
            (PatternIndex::Str(index), Prepared::Bytes(b)) => index.find(b),
            _ => None,
        };
        id.map(|id| id as usize)
    }
}
