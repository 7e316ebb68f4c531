//! Server objects that cannot become a CR (design S1, a server object no CR stands for gets a
//! mirror CR): the API server refused the mirror CR, because a CRD's schema is stricter than
//! the server (a task with an empty script, for one). Each is reported once per content (a
//! Warning Event on the `Infinispan` CR, the `objects_not_mirrored` gauge, a log line) and not
//! tried again until its content changes or it goes away from the server.

use std::collections::HashMap;

use super::locked::Locked;

/// The server names whose mirror CR the API server refused, with the digest of the content it
/// refused.
#[derive(Debug, Default)]
pub struct Unmirrorable {
    by_name: Locked<HashMap<String, String>>,
}

impl Unmirrorable {
    /// Whether the mirror CR of `name` with the content of `digest` was refused already.
    pub fn refused(&self, name: &str, digest: &str) -> bool {
        self.by_name
            .with(|refused| refused.get(name).is_some_and(|d| d == digest))
    }

    /// Records a refusal; whether it is new (to report) rather than a repeat.
    pub fn record(&self, name: &str, digest: &str) -> bool {
        self.by_name.with(|refused| {
            refused
                .insert(name.to_string(), digest.to_string())
                .as_deref()
                != Some(digest)
        })
    }

    /// The object was mirrored or went away: nothing to report about it any more.
    pub fn forget(&self, name: &str) {
        self.by_name.with(|refused| refused.remove(name));
    }

    /// How many server objects are not mirrored now.
    pub fn len(&self) -> usize {
        self.by_name.with(|refused| refused.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_new_once_per_content_and_forgotten_when_the_object_goes() {
        let unmirrorable = Unmirrorable::default();
        assert!(!unmirrorable.refused("t", "d1"));
        assert!(unmirrorable.record("t", "d1"));
        assert!(unmirrorable.refused("t", "d1"));
        // The same content again (a resync, a reconnect): not reported twice.
        assert!(!unmirrorable.record("t", "d1"));
        // New content: tried again, and a new refusal is reported.
        assert!(!unmirrorable.refused("t", "d2"));
        assert!(unmirrorable.record("t", "d2"));
        assert_eq!(unmirrorable.len(), 1);
        unmirrorable.forget("t");
        assert!(unmirrorable.is_empty());
        assert!(!unmirrorable.refused("t", "d2"));
    }
}
