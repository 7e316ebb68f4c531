//! The check of a converged run: the observed world (every CR of the five kinds in the
//! namespace, every object of the server) against the oracle's expectation, per object.
//!
//! Per slot expected present with version `v`: exactly one CR claims it (no duplicate), not
//! being deleted, `Ready=Synced` at its generation, its spec at `v`; the server has it at `v`.
//! Per slot expected absent: no CR claims it and the server does not have it ("deleted came
//! back" when it was ever present in the log). Per slot expected unmirrored with version `v`
//! (ToServer): no CR claims it, the server has it at `v`. Per slot expected read-only (FromServer):
//! exactly one CR claims it, not being deleted, `Ready=ReadOnlyMode` at its generation, its spec
//! at the CR's version; the server has the server's version, or nothing. Anything else of the
//! run's kinds (a CR or a server object outside the slots) is a stray; in FromServer mode a CR
//! with the operator's finalizer is wrong too (E3: "no finalizers added").

use std::collections::BTreeMap;

use common_crds::ResourceKind as Kind;

use super::model::{Slot, Version};
use super::oracle::Expect;
use super::plan::Mode;

/// A CR as the check sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedCr {
    pub kind: Kind,
    pub name: String,
    pub server_name: String,
    pub deleting: bool,
    /// Carries the resources operator's finalizer.
    pub finalizer: bool,
    /// `Ready`'s reason when the status is at the CR's generation.
    pub ready: Option<String>,
    pub version: Option<Version>,
}

/// Everything the check looks at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct World {
    pub crs: Vec<ObservedCr>,
    /// Every non-internal server object of the five kinds: its version, `None` when the
    /// content holds none the driver wrote.
    pub server: BTreeMap<(Kind, String), Option<Version>>,
}

/// One thing wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub slot: Option<Slot>,
    pub what: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.slot {
            Some(slot) => write!(f, "{slot}: {}", self.what),
            None => f.write_str(&self.what),
        }
    }
}

fn show(v: Option<Version>) -> String {
    v.map_or_else(|| "no version".to_string(), |v| format!("v{v}"))
}

/// Compares `world` with `expected` (a run in `mode`); `ever_present` are the slots some
/// applied operation created (their absence is a loss, their presence when expected absent a
/// resurrection).
pub fn check(
    per_kind: usize,
    expected: &BTreeMap<Slot, Expect>,
    ever_present: &std::collections::BTreeSet<Slot>,
    world: &World,
    mode: Mode,
) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let mut claims: BTreeMap<Slot, Vec<&ObservedCr>> = BTreeMap::new();
    for cr in &world.crs {
        let slot = Slot::from_server_name(cr.kind, &cr.server_name, per_kind);
        if mode == Mode::FromServer && cr.finalizer {
            out.push(Mismatch {
                slot,
                what: format!(
                    "CR {} has the operator's finalizer (FromServer adds none)",
                    cr.name
                ),
            });
        }
        match slot {
            Some(slot) => claims.entry(slot).or_default().push(cr),
            None => out.push(Mismatch {
                slot: None,
                what: format!(
                    "stray {} CR {} (server name {})",
                    cr.kind, cr.name, cr.server_name
                ),
            }),
        }
    }
    for (kind, name) in world.server.keys() {
        if Slot::from_server_name(*kind, name, per_kind).is_none() {
            out.push(Mismatch {
                slot: None,
                what: format!("stray {kind} {name} on the server"),
            });
        }
    }
    for (slot, expect) in expected {
        let crs = claims.get(slot).map(Vec::as_slice).unwrap_or_default();
        let server = world.server.get(&(slot.kind, slot.server_name()));
        let mut wrong = |what: String| {
            out.push(Mismatch {
                slot: Some(*slot),
                what,
            })
        };
        let names: Vec<&str> = crs.iter().map(|c| c.name.as_str()).collect();
        let back = if ever_present.contains(slot) {
            " (deleted, came back)"
        } else {
            ""
        };
        // What the CRs must be: none, or exactly one with this version and `Ready` reason.
        let cr_expected = match expect {
            Expect::Absent | Expect::Unmirrored(_) => None,
            Expect::Present(v) => Some((*v, "Synced")),
            Expect::ReadOnly { cr, .. } => Some((*cr, "ReadOnlyMode")),
        };
        // What the server must have.
        let server_expected = match expect {
            Expect::Absent => None,
            Expect::Present(v) | Expect::Unmirrored(v) => Some(*v),
            Expect::ReadOnly { server, .. } => *server,
        };
        match cr_expected {
            None if !crs.is_empty() => {
                let what = match expect {
                    Expect::Unmirrored(_) => "expected no CR (not mirrored)",
                    _ => "expected absent",
                };
                wrong(format!("{what}, CRs {names:?} claim it{back}"));
            }
            None => {}
            Some((v, reason)) => {
                if crs.len() > 1 {
                    wrong(format!("duplicate CRs {names:?} claim it"));
                }
                match crs.first() {
                    None => wrong(format!("expected a CR at v{v}, no CR claims it (missing)")),
                    Some(cr) => {
                        if cr.deleting {
                            wrong(format!("CR {} is being deleted", cr.name));
                        }
                        if cr.ready.as_deref() != Some(reason) {
                            wrong(format!(
                                "CR {}: Ready reason {:?} at its generation, not {reason}",
                                cr.name, cr.ready
                            ));
                        }
                        if cr.version != Some(v) {
                            wrong(format!(
                                "CR {} holds {}, expected v{v}",
                                cr.name,
                                show(cr.version)
                            ));
                        }
                    }
                }
            }
        }
        match (server_expected, server) {
            (None, None) => {}
            (None, Some(have)) => {
                let what = match expect {
                    Expect::ReadOnly { .. } => "expected nothing on the server (not pushed)",
                    _ => "expected absent",
                };
                wrong(format!(
                    "{what}, the server has it at {}{back}",
                    show(*have)
                ));
            }
            (Some(v), None) => wrong(format!("expected v{v}, not on the server (missing)")),
            (Some(v), Some(have)) if *have != Some(v) => {
                wrong(format!("the server holds {}, expected v{v}", show(*have)))
            }
            (Some(_), Some(_)) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const SLOT: Slot = Slot {
        kind: Kind::Schema,
        index: 1,
    };

    fn cr(name: &str, v: Option<Version>) -> ObservedCr {
        ObservedCr {
            kind: Kind::Schema,
            name: name.to_string(),
            server_name: SLOT.server_name(),
            deleting: false,
            finalizer: true,
            ready: Some("Synced".to_string()),
            version: v,
        }
    }

    fn world(crs: Vec<ObservedCr>, server: Option<Option<Version>>) -> World {
        let mut w = World {
            crs,
            ..World::default()
        };
        if let Some(v) = server {
            w.server.insert((Kind::Schema, SLOT.server_name()), v);
        }
        w
    }

    fn run(expect: Expect, world: &World) -> Vec<String> {
        run_in(Mode::Bidirectional, expect, world)
    }

    fn run_in(mode: Mode, expect: Expect, world: &World) -> Vec<String> {
        let expected = BTreeMap::from([(SLOT, expect)]);
        let ever = BTreeSet::from([SLOT]);
        check(3, &expected, &ever, world, mode)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn agreement_passes() {
        assert!(
            run(
                Expect::Present(4),
                &world(vec![cr("chaos-schema-1", Some(4))], Some(Some(4)))
            )
            .is_empty()
        );
        assert!(run(Expect::Absent, &world(vec![], None)).is_empty());
    }

    #[test]
    fn each_disagreement_is_named() {
        let got = run(
            Expect::Present(4),
            &world(vec![cr("a", Some(3))], Some(Some(5))),
        );
        assert_eq!(
            got,
            vec![
                "Schema chaos-schema-1.proto: CR a holds v3, expected v4",
                "Schema chaos-schema-1.proto: the server holds v5, expected v4",
            ]
        );
        let got = run(Expect::Present(4), &world(vec![], None));
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got.iter().all(|g| g.contains("missing")));
        let got = run(
            Expect::Absent,
            &world(vec![cr("m", Some(2))], Some(Some(2))),
        );
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got.iter().all(|g| g.contains("came back")));
    }

    #[test]
    fn duplicates_unsynced_and_deleting_crs_fail() {
        let mut pending = cr("b", Some(4));
        pending.ready = Some("Pending".into());
        pending.deleting = true;
        let got = run(
            Expect::Present(4),
            &world(vec![pending, cr("c", Some(4))], Some(Some(4))),
        );
        assert!(
            got.iter()
                .any(|g| g.contains("duplicate CRs [\"b\", \"c\"]")),
            "{got:?}"
        );
        assert!(got.iter().any(|g| g.contains("being deleted")), "{got:?}");
        assert!(got.iter().any(|g| g.contains("not Synced")), "{got:?}");
    }

    #[test]
    fn strays_on_either_side_fail() {
        let mut w = world(vec![], None);
        w.crs.push(ObservedCr {
            kind: Kind::Cache,
            name: "x".into(),
            server_name: "x".into(),
            deleting: false,
            finalizer: false,
            ready: None,
            version: None,
        });
        w.server.insert((Kind::Task, "y".into()), None);
        let got = run(Expect::Absent, &w);
        assert_eq!(got.len(), 2, "{got:?}");
    }

    #[test]
    fn unmirrored_objects_have_no_cr() {
        assert!(
            run_in(
                Mode::ToServer,
                Expect::Unmirrored(3),
                &world(vec![], Some(Some(3)))
            )
            .is_empty()
        );
        let got = run_in(
            Mode::ToServer,
            Expect::Unmirrored(3),
            &world(vec![cr("m", Some(3))], Some(Some(3))),
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].contains("expected no CR (not mirrored)"), "{got:?}");
        let got = run_in(Mode::ToServer, Expect::Unmirrored(3), &world(vec![], None));
        assert_eq!(
            got,
            vec!["Schema chaos-schema-1.proto: expected v3, not on the server (missing)"]
        );
    }

    #[test]
    fn read_only_crs_keep_their_content_and_say_so() {
        let mut ro = cr("chaos-schema-1", Some(5));
        ro.ready = Some("ReadOnlyMode".into());
        ro.finalizer = false;
        let expect = Expect::ReadOnly {
            cr: 5,
            server: Some(2),
        };
        assert!(
            run_in(
                Mode::FromServer,
                expect,
                &world(vec![ro.clone()], Some(Some(2)))
            )
            .is_empty()
        );
        // Pushed after all, or reported Synced, or not there.
        let got = run_in(
            Mode::FromServer,
            expect,
            &world(vec![ro.clone()], Some(Some(5))),
        );
        assert_eq!(
            got,
            vec!["Schema chaos-schema-1.proto: the server holds v5, expected v2"]
        );
        let mut synced = ro.clone();
        synced.ready = Some("Synced".into());
        let got = run_in(
            Mode::FromServer,
            expect,
            &world(vec![synced], Some(Some(2))),
        );
        assert!(got[0].contains("not ReadOnlyMode"), "{got:?}");
        let got = run_in(Mode::FromServer, expect, &world(vec![], Some(Some(2))));
        assert!(got[0].contains("no CR claims it"), "{got:?}");
        // Nothing expected on the server.
        let lost = Expect::ReadOnly {
            cr: 5,
            server: None,
        };
        assert!(run_in(Mode::FromServer, lost, &world(vec![ro.clone()], None)).is_empty());
        let got = run_in(Mode::FromServer, lost, &world(vec![ro], Some(Some(5))));
        assert!(
            got[0].contains("expected nothing on the server (not pushed)"),
            "{got:?}"
        );
    }

    #[test]
    fn finalizers_are_wrong_only_in_from_server_mode() {
        let with = world(vec![cr("chaos-schema-1", Some(4))], Some(Some(4)));
        assert!(run(Expect::Present(4), &with).is_empty());
        assert!(run_in(Mode::ToServer, Expect::Present(4), &with).is_empty());
        let got = run_in(Mode::FromServer, Expect::Present(4), &with);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].contains("finalizer"), "{got:?}");
    }
}
