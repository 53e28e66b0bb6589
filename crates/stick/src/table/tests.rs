use super::*;
use crate::data::DataType;

fn conf(size: usize, expire: Option<u64>, nopurge: bool) -> TableConf {
    let mut layout = Layout::default();
    layout.add(DataType::ConnCnt, 0).expect("store");
    layout.add(DataType::HttpReqRate, 10_000).expect("store");
    TableConf {
        name: "t".to_owned(),
        key: KeyType::Ip,
        size,
        expire,
        nopurge,
        layout,
    }
}

fn keys(t: &Table, now: u64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    t.for_each(now, |e| out.push(e.key.to_vec()));
    out
}

#[test]
fn entries_expire_when_unused() {
    let t = Table::new(conf(10, Some(30_000), false));
    t.upsert(&[1, 1, 1, 1], 1_000, |d, _| d.add(DataType::ConnCnt, 1));
    assert_eq!(t.used(30_999), 1);
    // Each use pushes the expiry back.
    t.lookup(&[1, 1, 1, 1], 20_000, true, |_, _| ());
    assert_eq!(t.used(49_999), 1);
    assert_eq!(t.used(50_000), 0);
    assert!(t.lookup(&[1, 1, 1, 1], 50_000, false, |_, _| ()).is_none());
}

#[test]
fn tracked_entries_never_expire() {
    let t = Table::new(conf(10, Some(1_000), false));
    let id = t.track(&[2, 2, 2, 2], 0).expect("tracked");
    assert_eq!(t.used(100_000), 1);
    assert_eq!(t.update(&id, 100_000, |_, refs| refs), Some(1));
    t.release(id, 100_000, |d| d.add(DataType::ConnCnt, 1));
    // Released at 100 s: the expiry starts again from there.
    assert_eq!(t.used(100_999), 1);
    assert_eq!(t.used(101_000), 0);
}

#[test]
fn full_table_purges_the_least_recently_used() {
    let t = Table::new(conf(3, Some(60_000), false));
    for (i, now) in [(1u8, 1_000), (2, 2_000), (3, 3_000)] {
        t.upsert(&[i, 0, 0, 0], now, |_, _| ());
    }
    // Using 1 again makes 2 the oldest.
    t.lookup(&[1, 0, 0, 0], 4_000, true, |_, _| ());
    t.upsert(&[4, 0, 0, 0], 5_000, |_, _| ());
    assert_eq!(
        keys(&t, 5_000),
        vec![vec![1, 0, 0, 0], vec![3, 0, 0, 0], vec![4, 0, 0, 0]]
    );
}

#[test]
fn tables_without_expire_purge_by_last_use() {
    let t = Table::new(conf(2, None, false));
    t.upsert(&[1, 0, 0, 0], 1, |_, _| ());
    t.upsert(&[2, 0, 0, 0], 2, |_, _| ());
    t.lookup(&[1, 0, 0, 0], 3, true, |_, _| ());
    t.upsert(&[3, 0, 0, 0], 4, |_, _| ());
    assert_eq!(
        keys(&t, 1_000_000),
        vec![vec![1, 0, 0, 0], vec![3, 0, 0, 0]]
    );
}

#[test]
fn referenced_entries_are_not_purged() {
    let t = Table::new(conf(2, Some(60_000), false));
    let a = t.track(&[1, 0, 0, 0], 1).expect("tracked");
    let b = t.track(&[2, 0, 0, 0], 2).expect("tracked");
    assert!(t.track(&[3, 0, 0, 0], 3).is_none());
    assert!(t.upsert(&[3, 0, 0, 0], 3, |_, _| ()).is_none());
    t.release(a, 4, |_| ());
    let c = t.track(&[3, 0, 0, 0], 5).expect("tracked after a release");
    assert_eq!(keys(&t, 5), vec![vec![2, 0, 0, 0], vec![3, 0, 0, 0]]);
    t.release(b, 6, |_| ());
    t.release(c, 6, |_| ());
}

#[test]
fn nopurge_refuses_new_entries() {
    let t = Table::new(conf(1, None, true));
    t.upsert(&[1, 0, 0, 0], 1, |_, _| ());
    assert!(t.upsert(&[2, 0, 0, 0], 2, |_, _| ()).is_none());
    assert_eq!(keys(&t, 3), vec![vec![1, 0, 0, 0]]);
}

#[test]
fn rates_follow_the_clock() {
    let t = Table::new(conf(10, Some(60_000), false));
    let id = t.track(&[9, 9, 9, 9], 100_000).expect("tracked");
    for i in 0..10 {
        t.update(&id, 100_000 + i * 100, |d, _| {
            d.add(DataType::HttpReqRate, 1)
        });
    }
    let rate = |now| {
        t.peek(&id, now, |d, _| d.get(DataType::HttpReqRate))
            .flatten()
    };
    assert_eq!(rate(101_000), Some(10));
    assert_eq!(rate(115_000), Some(5));
    assert_eq!(rate(120_000), Some(0));
    // Types the table does not store have no value.
    assert_eq!(t.peek(&id, 0, |d, _| d.get(DataType::Gpc0)).flatten(), None);
    t.release(id, 120_000, |_| ());
}

#[test]
fn counters_and_removal() {
    let t = Table::new(conf(10, None, false));
    let id = t.track(&[5, 5, 5, 5], 0).expect("tracked");
    t.upsert(&[6, 6, 6, 6], 0, |d, _| d.set(DataType::ConnCnt, 7));
    t.update(&id, 0, |d, _| {
        d.count(DataType::ConnCnt, DataType::ConnRate, 1)
    });
    // Referenced entries survive a clear.
    assert_eq!(t.remove_where(0, |_, _| true), 1);
    assert_eq!(keys(&t, 0), vec![vec![5, 5, 5, 5]]);
    let mut seen = Vec::new();
    t.for_each(0, |e| seen.push((e.refs, e.data.get(DataType::ConnCnt))));
    assert_eq!(seen, vec![(1, Some(1))]);
    t.release(id, 0, |d| d.decrement(DataType::ConnCnt));
    assert_eq!(
        t.lookup(&[5, 5, 5, 5], 0, false, |d, r| (
            d.get(DataType::ConnCnt),
            r
        )),
        Some((Some(0), 0))
    );
}
