//! Counters: the `Counter` CR and a clustered counter on the server.
//!
//! - The server object is the counter's definition ([`CounterConfig`]), never its value: the
//!   value changes with every increment and is not the CR's business (the spec is the
//!   definition; users read the value from the server, see docs/sync.md).
//! - Counters come from the counter feed (a names list every `--counter-list-interval`, design
//!   R5: counter events, where a server has them, reach only one node).
//! - Immutable on the server: a changed definition is `Ready=False, reason=Immutable` naming
//!   the attributes, or, with `updates.strategy: recreate`, deleted and created again, which
//!   resets the value.
//! - Persistent counters survive a server restart, volatile ones do not (design R2, removals only
//!   when proven): the storage is the counter's own, so it decides whether an absence after a
//!   restart is a removal.

use common_crds::Counter;
use common_crds::common::UpdateStrategy;
use common_crds::counter::{CounterStorage as CrStorage, CounterType};
use infinispan_rest::{
    Client, ConfigEvent, CounterConfig, CounterStorage, CreatedCounters, InternalObjects,
};
use serde_json::{Value, json};

use crate::engine::decision::{Comparison, Dependencies, KindCapabilities};
use crate::engine::digest::json_digest;
use crate::engine::kind::{
    Compared, KindAdapter, KindError, ServerChange, gone_is_deleted, no_update_in_place,
};

/// The counter adapter.
#[derive(Debug, Clone)]
pub struct CounterAdapter {
    client: Client,
    internal: InternalObjects,
    /// Told each counter this adapter creates (the counter feed's, see [`CreatedCounters`]).
    created: CreatedCounters,
}

impl CounterAdapter {
    pub fn new(client: Client, internal: InternalObjects, created: CreatedCounters) -> Self {
        Self {
            client,
            internal,
            created,
        }
    }
}

/// The definition a Counter CR asks for.
pub fn desired(cr: &Counter) -> CounterConfig {
    let spec = &cr.spec;
    let storage = match spec.storage {
        CrStorage::Volatile => CounterStorage::Volatile,
        CrStorage::Persistent => CounterStorage::Persistent,
    };
    match spec.type_ {
        CounterType::Strong => CounterConfig::Strong {
            initial_value: spec.initial_value,
            storage,
            lower_bound: spec.lower_bound,
            upper_bound: spec.upper_bound,
            lifespan: spec.lifespan,
        },
        CounterType::Weak => CounterConfig::Weak {
            initial_value: spec.initial_value,
            storage,
            concurrency_level: spec.concurrency_level.and_then(|c| u32::try_from(c).ok()),
        },
    }
}

/// The concurrency level the server gives a weak counter created without one (16.0.7 reads
/// such a counter back with `"concurrency-level":"16"`).
pub const SERVER_DEFAULT_CONCURRENCY_LEVEL: u32 = 16;

/// A definition with the server's defaults filled in, for comparisons: a weak CR that leaves
/// `concurrencyLevel` out asks for the server's default, which the server reports explicitly.
/// Without this, such a CR was `Immutable` (or, with `recreate`, recreated and its value lost)
/// at its next generation, whatever that change was.
pub fn with_server_defaults(config: &CounterConfig) -> CounterConfig {
    match config {
        CounterConfig::Weak {
            initial_value,
            storage,
            concurrency_level: None,
        } => CounterConfig::Weak {
            initial_value: *initial_value,
            storage: *storage,
            concurrency_level: Some(SERVER_DEFAULT_CONCURRENCY_LEVEL),
        },
        other => other.clone(),
    }
}

/// The CR spec fields of a definition (every option, `null` for absent ones: a merge patch
/// clears what the server does not have).
pub fn spec_fields(config: &CounterConfig) -> Value {
    let storage = |s: &CounterStorage| match s {
        CounterStorage::Volatile => "Volatile",
        CounterStorage::Persistent => "Persistent",
    };
    match config {
        CounterConfig::Strong {
            initial_value,
            storage: s,
            lower_bound,
            upper_bound,
            lifespan,
        } => json!({
            "type": "strong",
            "initialValue": initial_value,
            "storage": storage(s),
            "lowerBound": lower_bound,
            "upperBound": upper_bound,
            "lifespan": lifespan,
            "concurrencyLevel": null,
        }),
        CounterConfig::Weak {
            initial_value,
            storage: s,
            concurrency_level,
        } => json!({
            "type": "weak",
            "initialValue": initial_value,
            "storage": storage(s),
            "lowerBound": null,
            "upperBound": null,
            "lifespan": null,
            "concurrencyLevel": concurrency_level,
        }),
    }
}

/// The attributes in which two definitions differ, for an `Immutable` message.
pub fn differences(cr: &CounterConfig, server: &CounterConfig) -> Vec<String> {
    let (a, b) = (spec_fields(cr), spec_fields(server));
    let mut out = Vec::new();
    if let (Some(a), Some(b)) = (a.as_object(), b.as_object()) {
        for (key, wanted) in a {
            let has = b.get(key).unwrap_or(&Value::Null);
            if wanted != has {
                out.push(format!("{key}: the CR says {wanted}, the server has {has}"));
            }
        }
    }
    out
}

impl KindAdapter for CounterAdapter {
    type Cr = Counter;
    type Object = CounterConfig;

    fn capabilities(&self) -> KindCapabilities {
        KindCapabilities {
            update_in_place: false,
            create: true,
            delete: true,
        }
    }

    fn is_internal(&self, server_name: &str) -> bool {
        self.internal.is_internal(server_name)
    }

    fn change_of(&self, event: &ConfigEvent) -> Option<(String, ServerChange<CounterConfig>)> {
        match event {
            ConfigEvent::CounterCreated { name, config } => {
                Some((name.clone(), ServerChange::Present(config.clone())))
            }
            ConfigEvent::CounterRemoved { name } => Some((name.clone(), ServerChange::Removed)),
            _ => None,
        }
    }

    fn digest(&self, object: &CounterConfig) -> String {
        json_digest(&object.to_json())
    }

    async fn read(&self, server_name: &str) -> Result<Option<CounterConfig>, KindError> {
        match self.client.counter_config(server_name).await {
            Ok(config) => Ok(Some(config)),
            Err(infinispan_rest::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    async fn create(&self, server_name: &str, cr: &Counter) -> Result<(), KindError> {
        self.client
            .create_counter(server_name, &desired(cr))
            .await?;
        self.created.created(server_name);
        Ok(())
    }

    /// Never called: counters cannot change in place (the capabilities say so).
    async fn update(&self, server_name: &str, _cr: &Counter) -> Result<(), KindError> {
        Err(no_update_in_place("counter", server_name))
    }

    async fn delete(&self, server_name: &str) -> Result<(), KindError> {
        gone_is_deleted(self.client.delete_counter(server_name).await)
    }

    async fn compare(&self, cr: &Counter, object: &CounterConfig) -> Result<Compared, KindError> {
        let wanted = with_server_defaults(&desired(cr));
        let object = &with_server_defaults(object);
        Ok(if &wanted == object {
            Compared::local(Comparison::Equal, Vec::new())
        } else {
            Compared::local(
                Comparison::Different { in_place: false },
                differences(&wanted, object),
            )
        })
    }

    async fn mirror_spec(
        &self,
        server_name: &str,
        object: &CounterConfig,
    ) -> Result<Value, KindError> {
        let mut spec = spec_fields(object);
        if let Some(map) = spec.as_object_mut() {
            map.retain(|_, v| !v.is_null());
            map.insert("name".to_string(), json!(server_name));
        }
        Ok(spec)
    }

    async fn spec_patch_from_server(
        &self,
        _cr: &Counter,
        object: &CounterConfig,
    ) -> Result<Value, KindError> {
        Ok(spec_fields(object))
    }

    fn update_strategy(&self, cr: &Counter) -> UpdateStrategy {
        cr.spec.update_strategy()
    }

    fn dependencies(&self, _cr: &Counter) -> Dependencies {
        Dependencies::default()
    }

    /// The counter's own storage says it (design R2, removals only when proven).
    fn persistent(&self, cr: &Counter) -> bool {
        cr.spec.storage == CrStorage::Persistent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_name_the_attributes() {
        let cr = CounterConfig::Strong {
            initial_value: 1,
            storage: CounterStorage::Volatile,
            lower_bound: None,
            upper_bound: Some(10),
            lifespan: None,
        };
        let server = CounterConfig::Strong {
            initial_value: 1,
            storage: CounterStorage::Volatile,
            lower_bound: None,
            upper_bound: Some(20),
            lifespan: None,
        };
        assert_eq!(
            differences(&cr, &server),
            vec!["upperBound: the CR says 10, the server has 20".to_string()]
        );
        assert!(differences(&cr, &cr).is_empty());
    }

    #[test]
    fn a_weak_counter_without_concurrency_level_matches_the_servers_default() {
        let cr = CounterConfig::Weak {
            initial_value: 7,
            storage: CounterStorage::Volatile,
            concurrency_level: None,
        };
        let server = CounterConfig::Weak {
            initial_value: 7,
            storage: CounterStorage::Volatile,
            concurrency_level: Some(SERVER_DEFAULT_CONCURRENCY_LEVEL),
        };
        assert_eq!(with_server_defaults(&cr), with_server_defaults(&server));
        let other = CounterConfig::Weak {
            initial_value: 7,
            storage: CounterStorage::Volatile,
            concurrency_level: Some(4),
        };
        assert_ne!(with_server_defaults(&cr), with_server_defaults(&other));
    }

    #[test]
    fn mirror_specs_leave_out_absent_options() {
        let weak = CounterConfig::Weak {
            initial_value: 3,
            storage: CounterStorage::Persistent,
            concurrency_level: Some(4),
        };
        let fields = spec_fields(&weak);
        assert_eq!(fields["type"], "weak");
        assert_eq!(fields["concurrencyLevel"], 4);
        assert_eq!(fields["lowerBound"], Value::Null);
    }
}
