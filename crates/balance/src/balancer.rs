//! The [`Balancer`]: one backend's server selection, driven by server events.
//!
//! Built once from the backend's `balance`, `hash-type`, `option allbackups` and
//! `hash-balance-factor` (configuration.txt §4.2) and the servers' [`ServerState`]s, it keeps the
//! structure its algorithm needs (a deadline heap, a static map, a load heap, a first-fit bitset
//! or a consistent-hash ring). Server events ([`Balancer::update`]) and connection bookkeeping
//! ([`Balancer::connection_started`], [`Balancer::connection_ended`]) adjust that structure
//! incrementally, so [`Balancer::pick`] never rebuilds anything and never allocates: this is the
//! "balance algorithms driven by server events, never recomputed per request" rule of the design.
//!
//! Servers form two tiers (§4.2 "option allbackups", §5.2 "backup"): the active servers, and the
//! backup servers, used only while no active server is usable. Without `allbackups` the backup
//! tier holds just the first usable backup (by position); with it, all usable backups are
//! balanced together with the same algorithm and weights. A server is usable when it is up (not
//! down, not in maintenance) with a weight above 0; draining servers are reported by the caller
//! with weight 0.

use crate::chash::Ring;
use crate::config::{Algorithm, HashMethod, HashType};
use crate::first::FirstFit;
use crate::hash::{avalanche, fold_words, hash};
use crate::leastconn::LeastConn;
use crate::map::StaticMap;
use crate::rr::Wrr;

/// The largest server weight (§5.2 "weight": "the maximal value is 256"). Larger values given
/// to the balancer count as 256.
pub const MAX_WEIGHT: u32 = 256;

/// What the balancer needs to know about one server right now. The caller computes it from the
/// configuration and the live state, and reports changes with [`Balancer::update`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerState {
    /// Effective weight, 0 to 256, after slowstart, `set weight`, agent checks or draining;
    /// 0 takes no new traffic (but keeps its connections).
    pub weight: u32,
    /// False while the server is down or in maintenance.
    pub usable: bool,
    /// True for `backup` servers.
    pub backup: bool,
    /// The server's current connection limit (`maxconn`, or the dynamic limit `minconn`/
    /// `fullconn` give); `None` or `Some(0)` means unlimited. Servers at their limit are skipped
    /// by `roundrobin`, `static-rr`, `leastconn` and `first`, and by the round robin used when a
    /// hash key is missing; hashes keep their affinity and the caller queues.
    pub maxconn: Option<u32>,
}

impl ServerState {
    /// A usable, active server of this weight without a connection limit.
    pub const fn new(weight: u32) -> Self {
        ServerState {
            weight,
            usable: true,
            backup: false,
            maxconn: None,
        }
    }
}

/// What a pick gets from the request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PickInput<'a> {
    /// The hash key the caller extracted for a hash-based algorithm ([`crate::source_key`],
    /// [`crate::uri_key`], [`crate::url_param_key`], [`crate::hdr_key`], or the `balance hash`
    /// expression's value). `None` when the request has none: the pick then falls back to round
    /// robin, as HAProxy does. Ignored by the other algorithms.
    pub key: Option<&'a [u8]>,
    /// Caller-supplied randomness for `balance random` (any 64-bit value; it is mixed before
    /// use, so a counter works but a real random source spreads better). Ignored otherwise.
    pub random: u64,
    /// A server to avoid, such as the one a redispatched connection failed on. It is avoided if
    /// any other server can be chosen, and chosen when it is the only candidate.
    pub exclude: Option<usize>,
}

/// The per-server load figures the selection structures read during a pick.
pub(crate) struct Loads<'a> {
    states: &'a [ServerState],
    connections: &'a [u32],
    total: u64,
    balance_factor: Option<u32>,
}

impl<'a> Loads<'a> {
    pub(crate) fn new(
        states: &'a [ServerState],
        connections: &'a [u32],
        total: u64,
        balance_factor: Option<u32>,
    ) -> Self {
        Loads {
            states,
            connections,
            total,
            balance_factor,
        }
    }

    pub(crate) fn connections(&self, server: usize) -> u32 {
        self.connections.get(server).copied().unwrap_or(0)
    }

    /// Whether `server` is below its `maxconn`.
    pub(crate) fn has_room(&self, server: usize) -> bool {
        match self.states.get(server).and_then(|s| s.maxconn) {
            Some(limit) if limit > 0 => self.connections(server) < limit,
            _ => true,
        }
    }

    /// All connections of the backend.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    pub(crate) fn balance_factor(&self) -> Option<u32> {
        self.balance_factor
    }
}

/// What `pick` does with its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    /// Next server of the tier's rotation (roundrobin, static-rr, leastconn, first).
    Rotation,
    /// Hash the key (`source`: fold the address words instead of hashing); no key → rotation.
    Hashed { source: bool },
    /// `random(<draws>)` on the ring.
    Random { draws: u32 },
}

/// Which selection structure the tiers use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Rr,
    Map,
    LeastConn,
    First,
    Ring,
}

#[derive(Clone, Debug)]
enum Pool {
    Rr(Wrr),
    Map(StaticMap),
    LeastConn(LeastConn),
    First(FirstFit),
    Ring(Ring),
}

/// The active or the backup servers, with their selection structure.
#[derive(Clone, Debug)]
struct Tier {
    pool: Pool,
    /// Member weight per server; 0 = not in this tier.
    weight: Vec<u32>,
    members: usize,
}

impl Tier {
    fn new(kind: Kind, ids: &[u32]) -> Self {
        let n = ids.len();
        let pool = match kind {
            Kind::Rr => Pool::Rr(Wrr::new(n)),
            Kind::Map => Pool::Map(StaticMap::new(n)),
            Kind::LeastConn => Pool::LeastConn(LeastConn::new(n)),
            Kind::First => Pool::First(FirstFit::new(ids)),
            Kind::Ring => Pool::Ring(Ring::new(ids)),
        };
        Tier {
            pool,
            weight: vec![0; n],
            members: 0,
        }
    }

    /// Sets every server's weight at once, building a map or ring only once.
    fn fill(&mut self, weights: &[u32], loads: &Loads<'_>) {
        for (server, &weight) in weights.iter().enumerate() {
            match &mut self.pool {
                Pool::Map(map) => {
                    map.store(server, weight);
                }
                Pool::Ring(ring) => {
                    ring.store(server, weight);
                }
                _ => {}
            }
            self.set(server, weight, loads);
        }
        match &mut self.pool {
            Pool::Map(map) => map.rebuild(),
            Pool::Ring(ring) => ring.rebuild(),
            _ => {}
        }
    }

    /// Sets `server`'s weight in this tier (0 takes it out).
    fn set(&mut self, server: usize, weight: u32, loads: &Loads<'_>) {
        let Some(old) = self.weight.get(server).copied() else {
            return;
        };
        if old == weight {
            return;
        }
        self.weight[server] = weight;
        match (old > 0, weight > 0) {
            (false, true) => self.members += 1,
            (true, false) => self.members -= 1,
            _ => {}
        }
        let room = loads.has_room(server);
        match &mut self.pool {
            Pool::Rr(rr) => rr.set_weight(server, weight, room),
            Pool::Map(map) => map.set_weight(server, weight),
            Pool::LeastConn(lc) => lc.set_weight(server, weight, loads.connections(server), room),
            Pool::First(first) => first.set_member(server, weight > 0, room),
            Pool::Ring(ring) => ring.set_weight(server, weight),
        }
    }

    /// Tells the structure that `server`'s connection count or limit changed.
    fn refresh(&mut self, server: usize, loads: &Loads<'_>) {
        if self.weight.get(server).is_none_or(|&w| w == 0) {
            return;
        }
        let room = loads.has_room(server);
        match &mut self.pool {
            Pool::Rr(rr) => rr.set_room(server, room),
            Pool::LeastConn(lc) => lc.refresh(server, loads.connections(server), room),
            Pool::First(first) => first.set_room(server, room),
            Pool::Map(_) | Pool::Ring(_) => {}
        }
    }

    fn next(&mut self, avoid: Option<usize>, loads: &Loads<'_>) -> Option<usize> {
        match &mut self.pool {
            Pool::Rr(rr) => rr.pick(avoid),
            Pool::Map(map) => map.next(avoid, |s| loads.has_room(s)),
            Pool::LeastConn(lc) => lc.pick(avoid),
            Pool::First(first) => first.pick(avoid),
            Pool::Ring(ring) => ring.next(avoid, loads),
        }
    }

    fn by_hash(&mut self, hash: u32, avoid: Option<usize>, loads: &Loads<'_>) -> Option<usize> {
        match &mut self.pool {
            Pool::Map(map) => map.by_hash(hash, avoid),
            Pool::Ring(ring) => ring.by_hash(hash, avoid, loads),
            _ => self.next(avoid, loads),
        }
    }

    fn random(
        &mut self,
        seed: u64,
        draws: u32,
        avoid: Option<usize>,
        loads: &Loads<'_>,
    ) -> Option<usize> {
        match &mut self.pool {
            Pool::Ring(ring) => ring.random(seed, draws, avoid, loads),
            _ => self.next(avoid, loads),
        }
    }
}

/// One backend's server selection. See the module documentation for the model; the
/// algorithms' details are in the `rr`, `map`, `leastconn`, `first` and `chash` modules.
///
/// Servers are identified by their index in the slice given to [`Balancer::new`]; indexes out of
/// range are ignored everywhere, and no input makes a method panic. The balancer is plain data
/// (`Send + Sync`); a runtime shares it behind a lock.
#[derive(Clone, Debug)]
pub struct Balancer {
    rule: Rule,
    kind: Kind,
    hash: HashType,
    balance_factor: Option<u32>,
    allbackups: bool,
    /// Whether weight changes take effect (roundrobin, leastconn, first, consistent, random).
    dynamic: bool,
    states: Vec<ServerState>,
    /// The weights given at construction: static algorithms keep using them.
    configured: Vec<u32>,
    connections: Vec<u32>,
    total_connections: u64,
    ids: Vec<u32>,
    /// The backup that serves alone without `allbackups`.
    first_backup: Option<usize>,
    active: Tier,
    backup: Tier,
}

impl Balancer {
    /// A balancer for `servers`, with the backend's algorithm and settings.
    ///
    /// `hash` applies to `source`, `uri`, `url_param`, `hdr` and `hash`; `random` always uses the
    /// consistent ring. `hash_balance_factor` (`None` or `Some(0)`: off) applies to consistent
    /// hashing and `random` only, as in the manual. Server ids default to the position plus one,
    /// as in HAProxy; [`Balancer::with_ids`] sets explicit `id`s.
    pub fn new(
        algorithm: &Algorithm,
        hash: HashType,
        servers: &[ServerState],
        allbackups: bool,
        hash_balance_factor: Option<u32>,
    ) -> Self {
        let (rule, kind, dynamic) = match algorithm {
            Algorithm::RoundRobin => (Rule::Rotation, Kind::Rr, true),
            Algorithm::StaticRr => (Rule::Rotation, Kind::Map, false),
            Algorithm::LeastConn => (Rule::Rotation, Kind::LeastConn, true),
            Algorithm::First => (Rule::Rotation, Kind::First, true),
            Algorithm::Random { draws } => (Rule::Random { draws: *draws }, Kind::Ring, true),
            Algorithm::Source
            | Algorithm::Uri(_)
            | Algorithm::UrlParam { .. }
            | Algorithm::Hdr { .. }
            | Algorithm::Hash(_)
            | Algorithm::RdpCookie(_) => {
                let rule = Rule::Hashed {
                    source: *algorithm == Algorithm::Source,
                };
                match hash.method {
                    HashMethod::MapBased => (rule, Kind::Map, false),
                    HashMethod::Consistent => (rule, Kind::Ring, true),
                }
            }
        };
        let states: Vec<ServerState> = servers.iter().map(|s| clamp(*s)).collect();
        let n = states.len();
        let ids: Vec<u32> = (0..n).map(|i| (i as u32).wrapping_add(1)).collect();
        let mut balancer = Balancer {
            rule,
            kind,
            hash,
            balance_factor: hash_balance_factor.filter(|&f| f > 0),
            allbackups,
            dynamic,
            configured: states.iter().map(|s| s.weight).collect(),
            states,
            connections: vec![0; n],
            total_connections: 0,
            first_backup: None,
            active: Tier::new(kind, &ids),
            backup: Tier::new(kind, &ids),
            ids,
        };
        balancer.rebuild();
        balancer
    }

    /// Sets the servers' numeric ids (§5.2 "id"): `first` serves servers by increasing id, and
    /// the consistent ring places a server's points from its id (so farms whose servers keep
    /// their ids keep their mapping). `ids[i]` is server `i`'s id; missing entries keep the
    /// default (position plus one). Meant for construction: it rebuilds the selection.
    pub fn with_ids(mut self, ids: &[u32]) -> Self {
        for (slot, &id) in self.ids.iter_mut().zip(ids) {
            *slot = id;
        }
        self.rebuild();
        self
    }

    /// Adds a server at the end (a dynamic server, `add server`) with its state and `id`,
    /// and returns its index. The selection is rebuilt: an administrative event, never a
    /// per-request cost. Connection counts are kept.
    pub fn add_server(&mut self, state: ServerState, id: u32) -> usize {
        let state = clamp(state);
        self.configured.push(state.weight);
        self.states.push(state);
        self.connections.push(0);
        self.ids.push(id);
        self.rebuild();
        self.states.len() - 1
    }

    /// Builds both tiers from scratch.
    fn rebuild(&mut self) {
        self.active = Tier::new(self.kind, &self.ids);
        self.backup = Tier::new(self.kind, &self.ids);
        self.first_backup = self.find_first_backup();
        let n = self.states.len();
        let active: Vec<u32> = (0..n).map(|i| self.member_weight(i, false)).collect();
        let backup: Vec<u32> = (0..n).map(|i| self.member_weight(i, true)).collect();
        let loads = Loads::new(
            &self.states,
            &self.connections,
            self.total_connections,
            self.balance_factor,
        );
        self.active.fill(&active, &loads);
        self.backup.fill(&backup, &loads);
    }

    /// The weight the algorithm balances with: the live one, or the configured one for static
    /// algorithms ("changing a server's weight on the fly will have no effect"), where only
    /// weight 0 (and going back to non-zero) takes effect.
    fn weight_of(&self, server: usize) -> u32 {
        let Some(state) = self.states.get(server) else {
            return 0;
        };
        if !state.usable || state.weight == 0 {
            0
        } else if self.dynamic {
            state.weight
        } else {
            self.configured.get(server).copied().unwrap_or(0)
        }
    }

    fn find_first_backup(&self) -> Option<usize> {
        (0..self.states.len()).find(|&i| self.states[i].backup && self.weight_of(i) > 0)
    }

    /// `server`'s weight in the backup tier (`backup_tier`) or the active one.
    fn member_weight(&self, server: usize, backup_tier: bool) -> u32 {
        let Some(state) = self.states.get(server) else {
            return 0;
        };
        if state.backup != backup_tier {
            return 0;
        }
        if backup_tier && !self.allbackups && self.first_backup != Some(server) {
            return 0;
        }
        self.weight_of(server)
    }

    /// Reports a server event: up, down, maintenance, drain (weight 0), a weight change (the
    /// effective weight, e.g. a slowstart step), or a new connection limit. Only the structures
    /// of that server's tier change; consistent rings and static maps are rebuilt, which is an
    /// event-time cost, never a per-request one.
    pub fn update(&mut self, index: usize, state: ServerState) {
        let Some(slot) = self.states.get_mut(index) else {
            return;
        };
        let state = clamp(state);
        let old = std::mem::replace(slot, state);
        if (old.backup || state.backup) && !self.allbackups {
            let previous = self.first_backup;
            self.first_backup = self.find_first_backup();
            if previous != self.first_backup {
                for server in [previous, self.first_backup].into_iter().flatten() {
                    self.sync(server);
                }
            }
        }
        self.sync(index);
        if old.maxconn != state.maxconn {
            self.refresh(index);
        }
    }

    /// Brings `server`'s membership of both tiers in line with its state.
    fn sync(&mut self, server: usize) {
        let active = self.member_weight(server, false);
        let backup = self.member_weight(server, true);
        let loads = Loads::new(
            &self.states,
            &self.connections,
            self.total_connections,
            self.balance_factor,
        );
        self.active.set(server, active, &loads);
        self.backup.set(server, backup, &loads);
    }

    fn refresh(&mut self, server: usize) {
        let loads = Loads::new(
            &self.states,
            &self.connections,
            self.total_connections,
            self.balance_factor,
        );
        self.active.refresh(server, &loads);
        self.backup.refresh(server, &loads);
    }

    /// Chooses a server for a new connection (or request, in HTTP mode), or `None`.
    ///
    /// `None` means either that no server is usable ([`Balancer::has_usable_server`] is false:
    /// answer 503) or that every usable server of the serving tier is at its `maxconn` (true:
    /// queue in the backend). Call [`Balancer::connection_started`] with the server that actually
    /// takes the connection: `leastconn`, `first`, `maxconn`, `random` and
    /// `hash-balance-factor` depend on those counts.
    ///
    /// Cost: O(log n) for roundrobin and leastconn, O(1) for static-rr and map-based hashing,
    /// O(log points) for consistent hashing (plus the walk past avoided or overloaded servers),
    /// `draws` lookups for random, O(n/64) for first; no allocation.
    pub fn pick(&mut self, input: &PickInput<'_>) -> Option<usize> {
        let key_hash = input.key.and_then(|key| self.key_hash(key));
        let (rule, random) = (self.rule, input.random);
        self.choose(input.exclude, |tier, avoid, loads| match rule {
            Rule::Rotation => tier.next(avoid, loads),
            Rule::Hashed { .. } => match key_hash {
                Some(h) => tier.by_hash(h, avoid, loads),
                None => tier.next(avoid, loads),
            },
            Rule::Random { draws } => tier.random(random, draws, avoid, loads),
        })
    }

    /// Runs `choose` on the tier that serves (the active servers, else the backups), with the
    /// server to avoid (an index in range) and the load figures; `None` when no server is
    /// usable.
    fn choose(
        &mut self,
        exclude: Option<usize>,
        choose: impl FnOnce(&mut Tier, Option<usize>, &Loads<'_>) -> Option<usize>,
    ) -> Option<usize> {
        let avoid = exclude.filter(|&e| e < self.states.len());
        let loads = Loads::new(
            &self.states,
            &self.connections,
            self.total_connections,
            self.balance_factor,
        );
        let tier = if self.active.members > 0 {
            &mut self.active
        } else if self.backup.members > 0 {
            &mut self.backup
        } else {
            return None;
        };
        choose(tier, avoid, &loads)
    }

    /// The hash a hash-based algorithm looks `key` up with, `None` for the other algorithms:
    /// what a redispatch looks up again ([`Balancer::pick_by_hash`]).
    pub fn key_hash(&self, key: &[u8]) -> Option<u32> {
        match self.rule {
            Rule::Hashed { source } => Some(self.hash_of(source, key)),
            Rule::Rotation | Rule::Random { .. } => None,
        }
    }

    /// Chooses a server by a hash [`Balancer::key_hash`] gave, avoiding `exclude` when
    /// another server can be chosen: consistent hashing walks on along the ring, as
    /// HAProxy's re-run of the hash on a redispatch does. `None` as for [`Balancer::pick`].
    pub fn pick_by_hash(&mut self, hash: u32, exclude: Option<usize>) -> Option<usize> {
        self.choose(exclude, |tier, avoid, loads| {
            tier.by_hash(hash, avoid, loads)
        })
    }

    fn hash_of(&self, source: bool, key: &[u8]) -> u32 {
        if source {
            let folded = fold_words(key);
            if self.hash.avalanche {
                avalanche(folded)
            } else {
                folded
            }
        } else {
            hash(self.hash.function, self.hash.avalanche, key)
        }
    }

    /// Counts a connection (or, in HTTP mode, a request) now served by `index`.
    pub fn connection_started(&mut self, index: usize) {
        let Some(count) = self.connections.get_mut(index) else {
            return;
        };
        *count = count.saturating_add(1);
        self.total_connections = self.total_connections.saturating_add(1);
        self.refresh(index);
    }

    /// Counts the end of a connection of `index` (ignored when it has none).
    pub fn connection_ended(&mut self, index: usize) {
        let Some(count) = self.connections.get_mut(index) else {
            return;
        };
        if *count == 0 {
            return;
        }
        *count -= 1;
        self.total_connections = self.total_connections.saturating_sub(1);
        self.refresh(index);
    }

    /// Whether `index` is below its `maxconn` (always true without one).
    pub fn has_room(&self, index: usize) -> bool {
        match self.states.get(index).and_then(|s| s.maxconn) {
            Some(limit) if limit > 0 => self.connections(index) < limit,
            _ => true,
        }
    }

    /// Whether `pick` could choose `index` now, ignoring `maxconn`: it is a member of the tier
    /// that serves (the active servers, or the backups when no active server is left). A
    /// draining (weight 0) server, or a backup while an active server is up, is not.
    pub fn in_serving_tier(&self, index: usize) -> bool {
        let tier = if self.active.members > 0 {
            &self.active
        } else {
            &self.backup
        };
        tier.weight.get(index).is_some_and(|&w| w > 0)
    }

    /// Whether any server, active or backup, can be picked (ignoring `maxconn`).
    pub fn has_usable_server(&self) -> bool {
        self.active.members > 0 || self.backup.members > 0
    }

    /// Whether weight changes take effect: false for `static-rr` and map-based hashing, where
    /// HAProxy's `set weight` only accepts 0% and 100%.
    pub fn is_dynamic(&self) -> bool {
        self.dynamic
    }

    /// The number of servers the balancer was built with.
    pub fn server_count(&self) -> usize {
        self.states.len()
    }

    /// The connections `index` currently serves, as counted by `connection_started`/`ended`.
    pub fn connections(&self, index: usize) -> u32 {
        self.connections.get(index).copied().unwrap_or(0)
    }

    /// The connections of all servers, as counted by `connection_started`/`ended`.
    pub fn total_connections(&self) -> u64 {
        self.total_connections
    }

    /// The last state reported for `index` (weight capped at [`MAX_WEIGHT`]).
    pub fn state(&self, index: usize) -> Option<ServerState> {
        self.states.get(index).copied()
    }
}

fn clamp(mut state: ServerState) -> ServerState {
    state.weight = state.weight.min(MAX_WEIGHT);
    state
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rr(weights: &[u32]) -> Balancer {
        let servers: Vec<_> = weights.iter().map(|&w| ServerState::new(w)).collect();
        Balancer::new(
            &Algorithm::RoundRobin,
            HashType::default(),
            &servers,
            false,
            None,
        )
    }

    #[test]
    fn out_of_range_indexes_are_ignored() {
        let mut b = rr(&[1]);
        b.update(5, ServerState::new(3));
        b.connection_started(9);
        b.connection_ended(9);
        b.connection_ended(0);
        assert_eq!(b.connections(9), 0);
        assert_eq!(b.state(9), None);
        assert_eq!(
            b.pick(&PickInput {
                exclude: Some(42),
                ..PickInput::default()
            }),
            Some(0)
        );
    }

    #[test]
    fn weights_are_capped() {
        let b = rr(&[1000]);
        assert_eq!(b.state(0).unwrap().weight, MAX_WEIGHT);
    }

    #[test]
    fn maxconn_zero_is_unlimited() {
        let mut s = ServerState::new(1);
        s.maxconn = Some(0);
        let mut b = Balancer::new(&Algorithm::First, HashType::default(), &[s], false, None);
        for _ in 0..5 {
            let p = b.pick(&PickInput::default()).unwrap();
            b.connection_started(p);
        }
        assert_eq!(b.connections(0), 5);
    }

    #[test]
    fn balancer_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Balancer>();
    }
}
