//! The registry of the kinds the resources operator keeps in sync with the server: one
//! [`ResourceKind`] per kind, with what the rest of the project says about it ([`KindInfo`]).
//! Every list of these kinds (CRDs, RBAC rules, the admission policy, the OLM bundle, the bulk
//! creation order, the drain of a cluster) is derived from [`ResourceKind::ALL`]; the
//! exhaustive `match`es on it (the CRD type of a kind, the server's event kind) are where the
//! compiler sends whoever adds a kind. `docs/adding-a-kind.md` lists what adding one takes.
//!
//! This module depends on nothing else of the crate: the CRD types refer to their kind, never
//! the other way round.

use std::fmt;

/// The kinds the resources operator keeps in sync with the server. The declaration order is
/// the order users read them in ([`ResourceKind::LISTED`]: CRDs, the CSV, messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceKind {
    Cache,
    Template,
    Counter,
    Schema,
    Task,
}

/// What the project says about one kind beyond its CRD type. The names must match the type's
/// `#[kube(...)]` attributes (a test of `generate` compares them).
#[derive(Debug, PartialEq, Eq)]
pub struct KindInfo {
    /// The Kubernetes kind.
    pub kind: &'static str,
    /// The plural resource name (`caches`, ...).
    pub plural: &'static str,
    /// The short name (`kubectl get ispncache`).
    pub short_name: &'static str,
    /// The name OLM consoles show (the CSV's `displayName`).
    pub display_name: &'static str,
    /// The spec fields a console form shows (CSV spec descriptors): (path below `spec`,
    /// display name).
    pub spec_fields: &'static [(&'static str, &'static str)],
    /// The CSV's example CR of this kind (`alm-examples`): its name and its spec as JSON.
    pub example: (&'static str, &'static str),
}

const CACHE: KindInfo = KindInfo {
    kind: "Cache",
    plural: "caches",
    short_name: "ispncache",
    display_name: "Cache",
    spec_fields: &[
        ("name", "Server name"),
        ("templateName", "Template name"),
        ("template", "Configuration"),
        ("updates.strategy", "Update strategy"),
        ("deletionPolicy", "Deletion policy"),
    ],
    example: (
        "example-cache",
        r#"{"template": "distributedCache:\n  mode: SYNC\n  statistics: true\n"}"#,
    ),
};

const TEMPLATE: KindInfo = KindInfo {
    kind: "Template",
    plural: "templates",
    short_name: "ispntemplate",
    display_name: "Cache Template",
    spec_fields: &[
        ("name", "Server name"),
        ("template", "Configuration"),
        ("updates.strategy", "Update strategy"),
        ("deletionPolicy", "Deletion policy"),
    ],
    example: (
        "example-template",
        r#"{"template": "replicatedCache:\n  mode: SYNC\n  memory:\n    maxCount: 10000\n"}"#,
    ),
};

const COUNTER: KindInfo = KindInfo {
    kind: "Counter",
    plural: "counters",
    short_name: "ispncounter",
    display_name: "Counter",
    spec_fields: &[
        ("name", "Server name"),
        ("type", "Type"),
        ("initialValue", "Initial value"),
        ("lowerBound", "Lower bound"),
        ("upperBound", "Upper bound"),
        ("storage", "Storage"),
        ("updates.strategy", "Update strategy"),
        ("deletionPolicy", "Deletion policy"),
    ],
    example: (
        "example-counter",
        r#"{"type": "strong", "initialValue": 0, "upperBound": 1000000}"#,
    ),
};

const SCHEMA: KindInfo = KindInfo {
    kind: "Schema",
    plural: "schemas",
    short_name: "ispnschema",
    display_name: "Protobuf Schema",
    spec_fields: &[
        ("name", "Server name"),
        ("schema", "Schema"),
        ("deletionPolicy", "Deletion policy"),
    ],
    example: (
        "example-schema",
        r#"{"schema": "package example;\n\nmessage Book {\n  optional string title = 1;\n}\n"}"#,
    ),
};

const TASK: KindInfo = KindInfo {
    kind: "Task",
    plural: "tasks",
    short_name: "ispntask",
    display_name: "Server Task",
    spec_fields: &[
        ("name", "Server name"),
        ("script", "Script"),
        ("deletionPolicy", "Deletion policy"),
    ],
    example: (
        "example-task",
        r#"{"script": "// mode=local,language=javascript\n\"hello from a Task CR\"\n"}"#,
    ),
};

impl ResourceKind {
    /// How many kinds there are.
    pub const COUNT: usize = 5;

    /// Every kind, in the order objects are created when many are created at once (design D1):
    /// schemas, templates, counters, caches, tasks. RBAC rules, the admission policy and the
    /// drain of a cluster list the kinds in this order too.
    pub const ALL: [ResourceKind; Self::COUNT] = [
        Self::Schema,
        Self::Template,
        Self::Counter,
        Self::Cache,
        Self::Task,
    ];

    /// Every kind in declaration order, the order users read them in (the CRDs, the CSV, the
    /// reference, messages): [`Self::ALL`] sorted.
    pub const LISTED: [ResourceKind; Self::COUNT] = {
        let mut listed = Self::ALL;
        let mut i = 0;
        while i < Self::COUNT {
            let kind = Self::ALL[i];
            listed[kind as usize] = kind;
            i += 1;
        }
        listed
    };

    /// What the project says about this kind.
    pub const fn info(self) -> &'static KindInfo {
        match self {
            Self::Cache => &CACHE,
            Self::Template => &TEMPLATE,
            Self::Counter => &COUNTER,
            Self::Schema => &SCHEMA,
            Self::Task => &TASK,
        }
    }

    /// The kind's place in [`Self::ALL`] (design D1's bulk creation order).
    pub const fn creation_rank(self) -> usize {
        let mut rank = 0;
        while rank < Self::COUNT {
            if Self::ALL[rank] as usize == self as usize {
                return rank;
            }
            rank += 1;
        }
        Self::COUNT
    }

    /// The Kubernetes kind.
    pub const fn as_str(self) -> &'static str {
        self.info().kind
    }

    /// The plural resource name (`caches`, ...).
    pub const fn plural(self) -> &'static str {
        self.info().plural
    }

    /// The kind named `kind` (the Kubernetes kind).
    pub fn from_kind(kind: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == kind)
    }

    /// The kinds of [`Self::LISTED`] as one phrase, each written by `name`: `Cache, Template,
    /// Counter, Schema and Task`.
    pub fn phrase(name: impl Fn(ResourceKind) -> String) -> String {
        let names: Vec<String> = Self::LISTED.into_iter().map(name).collect();
        match names.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => String::new(),
        }
    }
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_once_in_each_order() {
        // Exhaustive: a new kind fails to compile here until it is in the lists below.
        let listed_rank = |kind: ResourceKind| match kind {
            ResourceKind::Cache => 0,
            ResourceKind::Template => 1,
            ResourceKind::Counter => 2,
            ResourceKind::Schema => 3,
            ResourceKind::Task => 4,
        };
        for (i, kind) in ResourceKind::LISTED.into_iter().enumerate() {
            assert_eq!(listed_rank(kind), i, "{kind}");
            assert_eq!(kind as usize, i, "{kind}");
            assert_eq!(ResourceKind::ALL[kind.creation_rank()], kind);
        }
        let mut all = ResourceKind::ALL.to_vec();
        all.sort();
        assert_eq!(all, ResourceKind::LISTED);
    }

    #[test]
    fn design_d1_creation_order() {
        assert_eq!(
            ResourceKind::ALL.map(ResourceKind::as_str),
            ["Schema", "Template", "Counter", "Cache", "Task"]
        );
        assert_eq!(ResourceKind::Schema.creation_rank(), 0);
        assert_eq!(ResourceKind::Task.creation_rank(), 4);
    }

    #[test]
    fn names_and_phrase() {
        for kind in ResourceKind::ALL {
            let info = kind.info();
            assert_eq!(ResourceKind::from_kind(info.kind), Some(kind));
            assert_eq!(info.plural, format!("{}s", info.kind.to_lowercase()));
            assert_eq!(info.short_name, format!("ispn{}", info.kind.to_lowercase()));
            assert_eq!(kind.to_string(), info.kind);
        }
        assert_eq!(ResourceKind::from_kind("Backup"), None);
        assert_eq!(
            ResourceKind::phrase(|kind| kind.to_string()),
            "Cache, Template, Counter, Schema and Task"
        );
    }

    #[test]
    fn examples_are_json_objects() {
        for kind in ResourceKind::ALL {
            let (name, spec) = kind.info().example;
            assert!(name.starts_with("example-"), "{kind}");
            let spec: serde_json::Value =
                serde_json::from_str(spec).unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert!(spec.is_object(), "{kind}");
        }
    }
}
