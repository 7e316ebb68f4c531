//! Which resources a server job covers (pure): a Backup's or Restore's `SelectedResources`
//! turned into the server's `resources` object, without the resources operator's epoch
//! markers.
//!
//! What the server does with `resources` (measured on 16.0.7, backups and restores alike):
//!
//! | `resources` | the server covers |
//! |---|---|
//! | absent, or `{}` | everything |
//! | a kind left out (others given) | **none** of that kind |
//! | a kind `["*"]` | all of that kind |
//! | a kind `[]` | **all** of that kind (not none!) |
//! | a kind `["a","b"]` | those; a name that does not exist fails the whole job (`ISPN005048` on a backup, `ISPN005047` on a restore, seen only in the server log) |
//!
//! and "all caches" (`["*"]`, `[]` or no `resources`) includes every cache created through
//! the admin API, **the resources operator's `___infinispan-operator.sync-state.do-not-delete.*`
//! cache included** (and the `___infinispan-operator.epoch.*` / `.session.*` markers of its
//! earlier versions),
//! but not the server's internal caches (`___protobuf_metadata`, `___script_cache`).
//!
//! So the operator never sends `[]` and never sends "all caches":
//! - kind absent in the CR (or `["*"]`) -> all of it: `["*"]` for templates, counters, schemas
//!   and tasks; for caches the explicit list of the cache names the server lists (backup) or
//!   the archive holds (restore), minus the markers and the other internal objects;
//! - kind `[]` in the CR -> the kind is left out;
//! - names -> those names, markers dropped; schema names get `.proto` appended when missing,
//!   as the server names schemas; on a restore each name is checked against the archive first,
//!   so a missing one fails with a clear message instead of the server's silent 500;
//! - nothing selected at all is refused: the server would take `{}` as everything.
//!
//! A restored marker would make the target's resources operator take the source's state for
//! its own (resources-operator `engine/epoch.rs`): markers never travel, whatever the CR says.
//! A cache whose name holds `/` is left out of "all caches" (16.0.7 cannot back it up: the
//! whole backup fails, docs/server-api.md) and reported; named explicitly it is sent as asked.
//!
//! A restore of proto schemas together with anything else runs as two server jobs, the schemas
//! alone first ([`restore_steps`]): the server restores the kinds of one job concurrently, so
//! an indexed cache could otherwise come before its schema (`ISPN028022`).

use std::collections::BTreeSet;

use common_crds::common::SelectedResources;
use infinispan_rest::{BackupResources, InternalObjects};

use super::archive::ArchiveContents;

/// Name prefix of the resources operator's epoch markers (resources-operator
/// `engine/epoch.rs`: `___infinispan-operator.sync-state.do-not-delete.<id>`; earlier versions:
/// `___infinispan-operator.epoch.<id>` and `___infinispan-operator.session.<id>`).
pub const MARKER_PREFIX: &str = "___infinispan-operator.";

/// "All of this kind".
const ALL: &str = "*";

/// Whether `name` is one of the resources operator's epoch markers.
pub fn is_marker(name: &str) -> bool {
    name.starts_with(MARKER_PREFIX)
}

/// The selection cannot be sent to the server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    #[error(
        "nothing is selected: every kind of spec.resources is an empty list (leave a kind out to take all of it)"
    )]
    NothingSelected,
    #[error("not in the archive of the Backup: {}", .missing.join(", "))]
    NotInArchive { missing: Vec<String> },
}

/// What one kind of the CR's selection asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Wanted<'a> {
    All,
    None,
    Names(&'a [String]),
}

fn wanted(list: Option<&Vec<String>>) -> Wanted<'_> {
    match list {
        None => Wanted::All,
        Some(names) if names.iter().any(|n| n == ALL) => Wanted::All,
        Some(names) if names.is_empty() => Wanted::None,
        Some(names) => Wanted::Names(names),
    }
}

fn kinds(selected: Option<&SelectedResources>) -> [Wanted<'_>; 5] {
    match selected {
        None => [
            Wanted::All,
            Wanted::All,
            Wanted::All,
            Wanted::All,
            Wanted::All,
        ],
        Some(SelectedResources {
            caches,
            templates,
            counters,
            schemas,
            tasks,
        }) => [
            wanted(caches.as_ref()),
            wanted(templates.as_ref()),
            wanted(counters.as_ref()),
            wanted(schemas.as_ref()),
            wanted(tasks.as_ref()),
        ],
    }
}

/// A schema's server name: `.proto` appended when missing (design N1).
fn schema_name(name: &str) -> String {
    common_crds::naming::normalize_schema_name(name)
}

/// `Some` only for a non-empty list: an empty one would mean "all" to the server.
fn non_empty(names: Vec<String>) -> Option<Vec<String>> {
    (!names.is_empty()).then_some(names)
}

fn all() -> Option<Vec<String>> {
    Some(vec![ALL.to_string()])
}

fn dedup(names: impl IntoIterator<Item = String>) -> Vec<String> {
    names
        .into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

fn refuse_nothing(resources: BackupResources) -> Result<BackupResources, SelectionError> {
    let BackupResources {
        caches,
        templates,
        counters,
        proto_schemas,
        tasks,
    } = &resources;
    if [caches, templates, counters, proto_schemas, tasks]
        .iter()
        .all(|k| k.is_none())
    {
        return Err(SelectionError::NothingSelected);
    }
    Ok(resources)
}

/// Whether [`backup_resources`] needs the server's cache names (the CR takes all caches).
pub fn needs_cache_list(selected: Option<&SelectedResources>) -> bool {
    kinds(selected)[0] == Wanted::All
}

/// The `resources` of a backup job, and the caches left out of "all caches" because the
/// server cannot back them up. `server_caches` is the server's cache list, needed (see
/// [`needs_cache_list`]) when the CR takes all caches.
pub fn backup_resources(
    selected: Option<&SelectedResources>,
    server_caches: &[String],
) -> Result<(BackupResources, Vec<String>), SelectionError> {
    let [caches, templates, counters, schemas, tasks] = kinds(selected);
    let internal = InternalObjects::default();
    let mut left_out = Vec::new();
    let caches = match caches {
        Wanted::All => non_empty(dedup(
            server_caches
                .iter()
                .filter(|name| !internal.is_internal(name) && !is_marker(name))
                .filter(|name| {
                    let unsupported = name.contains('/');
                    if unsupported {
                        left_out.push(name.to_string());
                    }
                    !unsupported
                })
                .cloned(),
        )),
        Wanted::None => None,
        Wanted::Names(names) => non_empty(dedup(names.iter().filter(|n| !is_marker(n)).cloned())),
    };
    let simple = |wanted: Wanted<'_>, normalize: fn(&str) -> String| match wanted {
        Wanted::All => all(),
        Wanted::None => None,
        Wanted::Names(names) => non_empty(dedup(names.iter().map(|n| normalize(n)))),
    };
    let resources = refuse_nothing(BackupResources {
        caches,
        templates: simple(templates, str::to_string),
        counters: simple(counters, str::to_string),
        proto_schemas: simple(schemas, schema_name),
        tasks: simple(tasks, str::to_string),
    })?;
    Ok((resources, left_out))
}

/// The `resources` of a restore job from the archive `contents`. Names not in the archive
/// fail ([`SelectionError::NotInArchive`]), except counters (the archive keeps them in one
/// file; the server checks those).
pub fn restore_resources(
    selected: Option<&SelectedResources>,
    contents: &ArchiveContents,
) -> Result<BackupResources, SelectionError> {
    let [caches, templates, counters, schemas, tasks] = kinds(selected);
    let mut missing = Vec::new();
    let mut pick = |kind: &str,
                    wanted: Wanted<'_>,
                    present: &BTreeSet<String>,
                    normalize: fn(&str) -> String|
     -> Option<Vec<String>> {
        match wanted {
            Wanted::All => non_empty(present.iter().filter(|n| !is_marker(n)).cloned().collect()),
            Wanted::None => None,
            Wanted::Names(names) => {
                let names = dedup(names.iter().map(|n| normalize(n)).filter(|n| !is_marker(n)));
                missing.extend(
                    names
                        .iter()
                        .filter(|n| !present.contains(*n))
                        .map(|n| format!("{kind} '{n}'")),
                );
                non_empty(names)
            }
        }
    };
    let caches = pick("cache", caches, &contents.caches, str::to_string);
    // "*" rather than the names for the other kinds: they never hold markers.
    let star = |list: Option<Vec<String>>, wanted: &Wanted<'_>| match wanted {
        Wanted::All => list.map(|_| vec![ALL.to_string()]),
        _ => list,
    };
    let templates = star(
        pick(
            "template",
            templates.clone(),
            &contents.templates,
            str::to_string,
        ),
        &templates,
    );
    let proto_schemas = star(
        pick("schema", schemas.clone(), &contents.schemas, schema_name),
        &schemas,
    );
    let tasks = star(
        pick("task", tasks.clone(), &contents.tasks, str::to_string),
        &tasks,
    );
    let counters = match counters {
        Wanted::All => contents.has_counters.then(|| vec![ALL.to_string()]),
        Wanted::None => None,
        Wanted::Names(names) => non_empty(dedup(names.iter().cloned())),
    };
    if !missing.is_empty() {
        return Err(SelectionError::NotInArchive { missing });
    }
    let resources = BackupResources {
        caches,
        templates,
        counters,
        proto_schemas,
        tasks,
    };
    // An archive with nothing the CR selects: nothing to restore is an error too.
    refuse_nothing(resources)
}

/// The server jobs of one restore: the proto schemas alone first, when anything else is
/// restored with them, then the rest.
///
/// Infinispan 16 restores the kinds of a container concurrently (one stage per kind), so in a
/// single job an indexed cache can be created before the schema of its indexed type is
/// registered, and the job fails (`ISPN028022: ... declared indexed type 'x' is not known`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreSteps {
    /// Only the proto schemas, restored (and waited for) before [`Self::rest`]; `None` when one
    /// job restores everything (no schemas, or nothing but schemas).
    pub schemas: Option<BackupResources>,
    /// The selection of the restore job proper: all of it when `schemas` is `None`, otherwise
    /// all but the schemas.
    pub rest: BackupResources,
}

/// Splits the `resources` of a restore ([`restore_resources`]) into [`RestoreSteps`].
pub fn restore_steps(resources: BackupResources) -> RestoreSteps {
    let BackupResources {
        caches,
        templates,
        counters,
        proto_schemas,
        tasks,
    } = resources;
    let others = [&caches, &templates, &counters, &tasks]
        .iter()
        .any(|kind| kind.is_some());
    match proto_schemas {
        Some(schemas) if others => RestoreSteps {
            schemas: Some(BackupResources {
                proto_schemas: Some(schemas),
                ..BackupResources::default()
            }),
            rest: BackupResources {
                caches,
                templates,
                counters,
                proto_schemas: None,
                tasks,
            },
        },
        proto_schemas => RestoreSteps {
            schemas: None,
            rest: BackupResources {
                caches,
                templates,
                counters,
                proto_schemas,
                tasks,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn some(list: &[&str]) -> Option<Vec<String>> {
        Some(names(list))
    }

    fn server_caches() -> Vec<String> {
        names(&[
            "___infinispan-operator.epoch.abc",
            "___infinispan-operator.session.def",
            "___protobuf_metadata",
            "___script_cache",
            "people",
            "plain",
            "a/b",
            "respCache",
        ])
    }

    /// Never an empty list: the server takes `[]` as "all".
    fn assert_no_empty_list(r: &BackupResources) {
        for list in [
            &r.caches,
            &r.templates,
            &r.counters,
            &r.proto_schemas,
            &r.tasks,
        ]
        .into_iter()
        .flatten()
        {
            assert!(!list.is_empty(), "{r:?}");
        }
    }

    #[test]
    fn everything_is_every_kind_with_explicit_caches_and_no_marker() {
        let (r, left_out) = backup_resources(None, &server_caches()).expect("ok");
        assert_eq!(
            r,
            BackupResources {
                caches: some(&["people", "plain"]),
                templates: some(&["*"]),
                counters: some(&["*"]),
                proto_schemas: some(&["*"]),
                tasks: some(&["*"]),
            }
        );
        assert_eq!(left_out, names(&["a/b"]));
        assert!(needs_cache_list(None));
        // "*" in a list is "all" too, and the JSON has the server's key names
        let sel = SelectedResources {
            caches: some(&["*", "people"]),
            ..SelectedResources::default()
        };
        assert_eq!(
            backup_resources(Some(&sel), &server_caches())
                .expect("ok")
                .0,
            r
        );
        assert_eq!(
            serde_json::to_value(&r).expect("json"),
            serde_json::json!({"caches":["people","plain"],"templates":["*"],"counters":["*"],"proto-schemas":["*"],"tasks":["*"]})
        );
    }

    #[test]
    fn an_empty_list_leaves_the_kind_out_and_names_are_kept() {
        let sel = SelectedResources {
            caches: some(&["people", "___infinispan-operator.epoch.abc", "people"]),
            templates: some(&[]),
            counters: some(&["c1"]),
            schemas: some(&["person", "other.proto"]),
            tasks: some(&[]),
        };
        assert!(!needs_cache_list(Some(&sel)));
        let (r, left_out) = backup_resources(Some(&sel), &[]).expect("ok");
        assert_eq!(
            r,
            BackupResources {
                caches: some(&["people"]),
                templates: None,
                counters: some(&["c1"]),
                proto_schemas: some(&["other.proto", "person.proto"]),
                tasks: None,
            }
        );
        assert!(left_out.is_empty());
        assert_no_empty_list(&r);
    }

    #[test]
    fn a_server_with_only_markers_gives_no_cache_list_rather_than_an_empty_one() {
        let markers = names(&["___infinispan-operator.epoch.x", "___script_cache"]);
        let (r, _) = backup_resources(None, &markers).expect("ok");
        assert_eq!(r.caches, None);
        assert_no_empty_list(&r);
        // only caches wanted, and only markers there: nothing at all
        let sel = SelectedResources {
            templates: some(&[]),
            counters: some(&[]),
            schemas: some(&[]),
            tasks: some(&[]),
            ..SelectedResources::default()
        };
        assert_eq!(
            backup_resources(Some(&sel), &markers),
            Err(SelectionError::NothingSelected)
        );
        let none = SelectedResources {
            caches: some(&[]),
            ..sel
        };
        assert_eq!(
            backup_resources(Some(&none), &server_caches()),
            Err(SelectionError::NothingSelected)
        );
    }

    fn contents() -> ArchiveContents {
        ArchiveContents {
            caches: ["people", "plain", "___infinispan-operator.epoch.abc"]
                .map(String::from)
                .into(),
            templates: ["tmpl1"].map(String::from).into(),
            schemas: ["person.proto"].map(String::from).into(),
            tasks: ["hello"].map(String::from).into(),
            has_counters: true,
        }
    }

    #[test]
    fn a_restore_of_everything_names_the_archive_caches_without_markers() {
        let r = restore_resources(None, &contents()).expect("ok");
        assert_eq!(
            r,
            BackupResources {
                caches: some(&["people", "plain"]),
                templates: some(&["*"]),
                counters: some(&["*"]),
                proto_schemas: some(&["*"]),
                tasks: some(&["*"]),
            }
        );
        // kinds the archive lacks are left out
        let bare = ArchiveContents {
            caches: ["___infinispan-operator.epoch.abc", "c"]
                .map(String::from)
                .into(),
            ..ArchiveContents::default()
        };
        assert_eq!(
            restore_resources(None, &bare).expect("ok"),
            BackupResources {
                caches: some(&["c"]),
                ..BackupResources::default()
            }
        );
        let only_markers = ArchiveContents {
            caches: ["___infinispan-operator.epoch.abc"]
                .map(String::from)
                .into(),
            ..ArchiveContents::default()
        };
        assert_eq!(
            restore_resources(None, &only_markers),
            Err(SelectionError::NothingSelected)
        );
    }

    #[test]
    fn a_restore_checks_names_against_the_archive() {
        let sel = SelectedResources {
            caches: some(&["people", "nope", "___infinispan-operator.epoch.abc"]),
            templates: some(&["tmpl1"]),
            counters: some(&["anything"]),
            schemas: some(&["person"]),
            tasks: some(&["gone"]),
        };
        assert_eq!(
            restore_resources(Some(&sel), &contents()),
            Err(SelectionError::NotInArchive {
                missing: names(&["cache 'nope'", "task 'gone'"])
            })
        );
        let sel = SelectedResources {
            caches: some(&["people"]),
            tasks: some(&[]),
            ..sel
        };
        let r = restore_resources(Some(&sel), &contents()).expect("ok");
        assert_eq!(
            r,
            BackupResources {
                caches: some(&["people"]),
                templates: some(&["tmpl1"]),
                counters: some(&["anything"]),
                proto_schemas: some(&["person.proto"]),
                tasks: None,
            }
        );
        let e = restore_resources(
            Some(&SelectedResources {
                caches: some(&["nope"]),
                ..SelectedResources::default()
            }),
            &contents(),
        )
        .expect_err("missing");
        assert_eq!(
            e.to_string(),
            "not in the archive of the Backup: cache 'nope'"
        );
    }

    #[test]
    fn schemas_restore_first_and_alone_when_anything_else_comes_with_them() {
        let all = restore_resources(None, &contents()).expect("ok");
        let steps = restore_steps(all.clone());
        assert_eq!(
            steps.schemas,
            Some(BackupResources {
                proto_schemas: some(&["*"]),
                ..BackupResources::default()
            })
        );
        assert_eq!(
            steps.rest,
            BackupResources {
                proto_schemas: None,
                ..all
            }
        );
        // named schemas with one other kind (a counter, a template: any kind) split too
        for other in [
            BackupResources {
                counters: some(&["c"]),
                ..BackupResources::default()
            },
            BackupResources {
                templates: some(&["t"]),
                ..BackupResources::default()
            },
        ] {
            let steps = restore_steps(BackupResources {
                proto_schemas: some(&["person.proto"]),
                ..other.clone()
            });
            assert_eq!(
                steps.schemas.and_then(|s| s.proto_schemas),
                some(&["person.proto"])
            );
            assert_eq!(steps.rest, other);
        }
        // one job: no schemas, or nothing but schemas (never an empty selection)
        for single in [
            BackupResources {
                caches: some(&["people"]),
                tasks: some(&["*"]),
                ..BackupResources::default()
            },
            BackupResources {
                proto_schemas: some(&["*"]),
                ..BackupResources::default()
            },
        ] {
            assert_eq!(
                restore_steps(single.clone()),
                RestoreSteps {
                    schemas: None,
                    rest: single
                }
            );
        }
    }
}
