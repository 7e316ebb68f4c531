//! Identity and naming (design N1, server names): the server-side name of a resource CR, and the
//! name of the mirror CR the resources operator creates for an object that exists only on the
//! server.

use sha2::{Digest, Sha256};

use crate::kind::ResourceKind;

/// Longest name [`mirror_name`] returns.
///
/// The API server accepts object names of up to 253 characters (DNS-1123 subdomain), but a
/// mirror name is kept a DNS-1123 *label* (at most 63 characters, no dots): such a name is valid
/// for every kind and in every place a name may be copied to (a label value, a Service or
/// container name, a DNS label), and it stays readable in `kubectl get`. The hash suffix keeps
/// it unique, so truncating costs nothing.
pub const MAX_MIRROR_NAME_LEN: usize = 63;

/// Hex digits of the hash suffix of [`mirror_name`].
const HASH_HEX_LEN: usize = 8;

/// Suffix the server appends to schema names that lack it.
pub const SCHEMA_SUFFIX: &str = ".proto";

/// Name of the CR the resources operator creates for the server object `server_name` of cluster
/// `cluster` (design N1): `<cleaned name, truncated>-<first 8 hex of sha256(cluster NUL name)>`.
///
/// Cleaning lowercases ASCII letters, turns every other character outside `[a-z0-9]` into `-`,
/// collapses runs of `-` and trims them at both ends; the cleaned part is cut so that the whole
/// name has at most [`MAX_MIRROR_NAME_LEN`] characters. When nothing is left of the name, the
/// result is the hash alone. The hash covers the cluster and the *exact* server name, so names
/// that clean to the same text (`Foo` and `foo`, `a/b` and `a-b`) and the same name in two
/// clusters of one namespace map to different CRs. Deterministic: the same inputs always give
/// the same name, which is what makes creating a mirror CR idempotent.
pub fn mirror_name(cluster: &str, server_name: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(cluster.as_bytes());
    hasher.update([0u8]);
    hasher.update(server_name.as_bytes());
    let digest = hasher.finalize();
    let hash: String = digest
        .iter()
        .take(HASH_HEX_LEN / 2)
        .map(|byte| format!("{byte:02x}"))
        .collect();

    let mut cleaned = clean(server_name);
    // `clean` only emits ASCII, so any byte index is a char boundary.
    cleaned.truncate(MAX_MIRROR_NAME_LEN - HASH_HEX_LEN - 1);
    let cleaned = cleaned.trim_end_matches('-');
    if cleaned.is_empty() {
        hash
    } else {
        format!("{cleaned}-{hash}")
    }
}

/// Lowercase ASCII alphanumerics, everything else one `-` per run, no `-` at either end.
fn clean(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed = out.trim_end_matches('-').len();
    out.truncate(trimmed);
    out
}

/// The name the server gives a schema called `name`: the server appends `.proto` to names that
/// lack it, so `person` and `person.proto` are the same schema.
pub fn normalize_schema_name(name: &str) -> String {
    if name.ends_with(SCHEMA_SUFFIX) {
        name.to_string()
    } else {
        format!("{name}{SCHEMA_SUFFIX}")
    }
}

/// The server-side name of a resource CR (design N1): `spec.name` when set, else
/// `metadata.name`; schema names normalised to end in `.proto`.
pub fn server_name(kind: ResourceKind, spec_name: Option<&str>, metadata_name: &str) -> String {
    let name = spec_name.unwrap_or(metadata_name);
    match kind {
        ResourceKind::Schema => normalize_schema_name(name),
        ResourceKind::Cache
        | ResourceKind::Template
        | ResourceKind::Counter
        | ResourceKind::Task => name.to_string(),
    }
}

/// Whether `name` is a DNS-1123 label: 1 to 63 characters of `[a-z0-9-]`, starting and ending
/// with an alphanumeric.
pub fn is_dns1123_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// Whether `name` is a DNS-1123 subdomain (what the API server requires of most object names):
/// at most 253 characters, dot-separated DNS-1123 labels.
pub fn is_dns1123_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns1123_label)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cleans_and_appends_hash() {
        let name = mirror_name("demo", "Orders/EU_2024");
        assert!(name.starts_with("orders-eu-2024-"), "{name}");
        assert_eq!(name.len(), "orders-eu-2024-".len() + 8);
        assert!(is_dns1123_label(&name));
    }

    #[test]
    fn empty_cleaned_name_is_the_hash_alone() {
        for server_name in ["", "___", "日本語", "-", "..."] {
            let name = mirror_name("demo", server_name);
            assert_eq!(name.len(), 8, "{server_name:?} -> {name}");
            assert!(name.bytes().all(|b| b.is_ascii_hexdigit()), "{name}");
            assert!(is_dns1123_label(&name), "{name}");
        }
    }

    #[test]
    fn truncates_without_a_trailing_dash() {
        // The cut falls right after a '-': it must not stay before the hash's own '-'.
        let server_name = format!("{}-{}", "a".repeat(53), "b".repeat(100));
        let name = mirror_name("demo", &server_name);
        assert!(name.len() <= MAX_MIRROR_NAME_LEN);
        assert!(!name.contains("--"), "{name}");
        assert!(is_dns1123_label(&name), "{name}");
    }

    #[test]
    fn known_value_is_stable() {
        // sha256("demo\0orders") starts with these 8 hex digits; a change here changes the name
        // of every existing mirror CR (a migration, not a refactoring).
        let name = mirror_name("demo", "orders");
        let mut hasher = Sha256::new();
        hasher.update(b"demo\0orders");
        let expected: String = hasher.finalize()[..4]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(name, format!("orders-{expected}"));
    }

    #[test]
    fn adversarial_pairs_map_apart() {
        let long_a = format!("{}{}", "x".repeat(200), "a");
        let long_b = format!("{}{}", "x".repeat(200), "b");
        let pairs: [(&str, &str); 9] = [
            ("Foo", "foo"),
            ("a/b", "a-b"),
            ("a.b", "a_b"),
            ("x", "x.proto"),
            (&long_a, &long_b),
            ("café", "cafè"),
            ("日本", "中国"),
            ("a--b", "a-b"),
            ("-a", "a"),
        ];
        for (left, right) in pairs {
            let (l, r) = (mirror_name("demo", left), mirror_name("demo", right));
            assert_ne!(l, r, "{left:?} and {right:?} both map to {l}");
        }
    }

    #[test]
    fn schema_names_are_normalised() {
        assert_eq!(normalize_schema_name("person"), "person.proto");
        assert_eq!(normalize_schema_name("person.proto"), "person.proto");
        assert_eq!(normalize_schema_name("a.proto.bak"), "a.proto.bak.proto");
        assert_eq!(
            server_name(ResourceKind::Schema, None, "person"),
            "person.proto"
        );
        assert_eq!(
            server_name(ResourceKind::Schema, Some("x.proto"), "person"),
            "x.proto"
        );
        assert_eq!(
            server_name(ResourceKind::Cache, Some("Orders"), "orders"),
            "Orders"
        );
        assert_eq!(server_name(ResourceKind::Cache, None, "orders"), "orders");
        assert_eq!(server_name(ResourceKind::Task, None, "t.proto"), "t.proto");
    }

    #[test]
    fn dns_checks() {
        assert!(is_dns1123_label("a"));
        assert!(is_dns1123_label("a-1"));
        assert!(!is_dns1123_label("-a"));
        assert!(!is_dns1123_label("a-"));
        assert!(!is_dns1123_label("A"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_dns1123_subdomain("a.b-c.d"));
        assert!(!is_dns1123_subdomain("a..b"));
    }

    /// Any UTF-8 string of at most 255 bytes (the longest `spec.name`).
    fn server_names() -> impl Strategy<Value = String> {
        prop_oneof![
            ".{0,255}",
            "[a-zA-Z0-9._/-]{0,255}",
            "[-.]{0,20}[a-z]{0,250}",
        ]
        .prop_map(|mut s| {
            while s.len() > 255 {
                s.pop();
            }
            s
        })
    }

    proptest! {
        // A fixed seed and no persistence file: the same cases on every run and machine.
        #![proptest_config(ProptestConfig {
            cases: 2000,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x1f1_5ba1),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn mirror_names_are_valid_labels(cluster in "[a-z0-9-]{1,63}", server_name in server_names()) {
            let name = mirror_name(&cluster, &server_name);
            prop_assert!(name.len() <= MAX_MIRROR_NAME_LEN, "{} is {} long", name, name.len());
            prop_assert!(is_dns1123_label(&name), "{:?} -> {:?}", server_name, name);
            prop_assert!(is_dns1123_subdomain(&name), "{:?} -> {:?}", server_name, name);
        }

        #[test]
        fn mirror_names_are_deterministic(cluster in "[a-z0-9-]{1,63}", server_name in server_names()) {
            prop_assert_eq!(mirror_name(&cluster, &server_name), mirror_name(&cluster, &server_name));
        }

        #[test]
        fn mirror_names_differ_across_clusters(
            first in "[a-z0-9-]{1,63}",
            second in "[a-z0-9-]{1,63}",
            server_name in server_names(),
        ) {
            prop_assume!(first != second);
            prop_assert_ne!(mirror_name(&first, &server_name), mirror_name(&second, &server_name));
        }

        #[test]
        fn distinct_names_that_clean_alike_map_apart(base in "[a-z]{1,60}", variant in "[A-Z._/]{1,5}") {
            // `base` and `base` + punctuation (or a case change) clean to overlapping text.
            let other = format!("{base}{variant}");
            prop_assert_ne!(mirror_name("demo", &base), mirror_name("demo", &other));
        }
    }
}
