//! Which member syncs a new ConfigMap content starts, tells of a change, or stops (pure).

use std::collections::{BTreeMap, BTreeSet};

use common_crds::shared::Member;

/// A member's entry as read: the member, or why its value is not one.
pub type Entry = Result<Member, String>;

/// What a new content of the ConfigMap asks of the running members.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Clusters listed now and not running: a sync starts for each.
    pub join: BTreeSet<String>,
    /// Running clusters whose entry changed: each sync restarts with the new entry.
    pub change: BTreeSet<String>,
    /// Running clusters no longer listed: each sync stops (its Lease released).
    pub leave: BTreeSet<String>,
}

/// The changes from the `running` members' entries to the `listed` ones.
pub fn changes(running: &BTreeMap<String, Entry>, listed: &BTreeMap<String, Entry>) -> Changes {
    let mut changes = Changes::default();
    for (cluster, entry) in listed {
        match running.get(cluster) {
            None => {
                changes.join.insert(cluster.clone());
            }
            Some(before) if before != entry => {
                changes.change.insert(cluster.clone());
            }
            Some(_) => {}
        }
    }
    changes.leave = running
        .keys()
        .filter(|cluster| !listed.contains_key(*cluster))
        .cloned()
        .collect();
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(url: &str) -> Entry {
        Ok(Member::at(url))
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn members_join_change_and_leave_and_the_others_are_left_alone() {
        let running = BTreeMap::from([
            ("a".to_string(), member("http://a")),
            ("b".to_string(), member("http://b")),
            ("c".to_string(), Err("bad".to_string())),
        ]);
        let listed = BTreeMap::from([
            ("a".to_string(), member("http://a")),
            ("b".to_string(), member("https://b")),
            ("c".to_string(), member("http://c")),
            ("d".to_string(), member("http://d")),
        ]);
        assert_eq!(
            changes(&running, &listed),
            Changes {
                join: set(&["d"]),
                change: set(&["b", "c"]),
                leave: set(&[]),
            }
        );
        let fewer = BTreeMap::from([("b".to_string(), member("http://b"))]);
        assert_eq!(
            changes(&running, &fewer),
            Changes {
                join: set(&[]),
                change: set(&[]),
                leave: set(&["a", "c"]),
            }
        );
        assert_eq!(changes(&listed, &listed), Changes::default());
    }
}
