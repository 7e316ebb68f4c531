//! Object names: percent-encoding for URL paths and queries, and the internal-object filter.
//!
//! The server splits a REST path on raw `/` and then percent-decodes each segment with a query
//! decoder, so a literal `+` would become a space: every byte outside the RFC 3986 unreserved
//! set is encoded (`/` -> `%2F`, `+` -> `%2B`, space -> `%20`, Unicode as UTF-8 bytes).

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Everything but RFC 3986 unreserved characters (`A-Z a-z 0-9 - . _ ~`).
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Encodes one path segment or query value. The dot segments `.` and `..` (the server takes
/// them as names) are encoded too (`%2E`), so that nothing between client and server resolves
/// them as "this" or "the parent" path.
pub fn encode(name: &str) -> String {
    match name {
        "." => "%2E".to_owned(),
        ".." => "%2E%2E".to_owned(),
        _ => utf8_percent_encode(name, COMPONENT).to_string(),
    }
}

/// Recognises the server's internal objects, which are never mirrored, pushed or deleted
/// (design.md E4). The default list covers `___*` caches, `org.infinispan.*` templates and the
/// connector caches; both lists can be replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalObjects {
    /// A name starting with any of these is internal.
    pub prefixes: Vec<String>,
    /// A name equal to any of these is internal.
    pub names: Vec<String>,
}

impl Default for InternalObjects {
    fn default() -> Self {
        InternalObjects {
            prefixes: vec!["___".to_owned(), "org.infinispan.".to_owned()],
            names: vec![
                "respCache".to_owned(),
                "memcachedCache".to_owned(),
                "__recoveryInfoCacheName__".to_owned(),
            ],
        }
    }
}

impl InternalObjects {
    /// True when `name` is an internal object of the server.
    pub fn is_internal(&self, name: &str) -> bool {
        self.prefixes.iter().any(|p| name.starts_with(p.as_str()))
            || self.names.iter().any(|n| n == name)
    }

    /// Adds one exact name (e.g. the operator's own epoch marker).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.names.push(name.into());
        self
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn dot_segments_are_encoded() {
        assert_eq!(super::encode("."), "%2E");
        assert_eq!(super::encode(".."), "%2E%2E");
        assert_eq!(super::encode("..."), "...");
        assert_eq!(super::encode("a.b"), "a.b");
    }

    use super::*;
    use percent_encoding::percent_decode_str;
    use proptest::prelude::*;

    #[test]
    fn encodes_the_dangerous_characters() {
        assert_eq!(encode("a/b"), "a%2Fb");
        assert_eq!(encode("a+b"), "a%2Bb");
        assert_eq!(encode("a b"), "a%20b");
        assert_eq!(encode("é"), "%C3%A9");
        assert_eq!(encode("x.proto"), "x.proto");
        assert_eq!(encode("a?b#c%d&e=f"), "a%3Fb%23c%25d%26e%3Df");
        assert_eq!(encode("Cache_1-x~y"), "Cache_1-x~y");
    }

    proptest! {
        #[test]
        fn encoding_round_trips_and_is_safe(name in "\\PC{0,40}") {
            let enc = encode(&name);
            prop_assert!(enc.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)));
            let dec = percent_decode_str(&enc).decode_utf8();
            prop_assert_eq!(dec.ok().map(|c| c.into_owned()), Some(name));
        }
    }

    #[test]
    fn internal_objects() {
        let i = InternalObjects::default();
        for n in [
            "___protobuf_metadata",
            "___script_cache",
            "org.infinispan.RESP_DIST",
            "respCache",
            "memcachedCache",
        ] {
            assert!(i.is_internal(n), "{n}");
        }
        for n in ["orders", "org.example", "__x", "respcache"] {
            assert!(!i.is_internal(n), "{n}");
        }
        let i = i.with_name("infinispan-operator-epoch");
        assert!(i.is_internal("infinispan-operator-epoch"));
    }
}
