//! The config event stream: `GET /rest/v2/container/config?action=listen` as typed events.
//!
//! - [`sse`]: the Server-Sent Events parser;
//! - this module: decoding of the server's frames into [`ConfigEvent`];
//! - [`stream`]: the connection, replay tracking, dead-connection detection and reconnects.
//! - [`documents`]: the server's current documents of a stream's kinds in one request (what a
//!   drift check compares with what the events said);
//! - [`feeds`]: the same items for kinds the config stream does not carry on every version
//!   (schemas, tasks: an internal cache's entry events; counters: a names list).

pub mod documents;
pub mod feeds;
mod freshness;
pub mod sse;
pub mod stream;

use serde_json::Value;

use crate::counters::CounterConfig;
pub use crate::kind::EventKind;

/// One configuration change (or one replayed object) from the server.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigEvent {
    /// `create-cache`; `config` is the single-cache document `{"distributed-cache":{...}}`
    /// (as the cache was defined, not expanded with defaults).
    CacheCreated {
        name: String,
        config: Value,
    },
    /// `update-cache` (fired by every PUT, even an identical one).
    CacheUpdated {
        name: String,
        config: Value,
    },
    CacheRemoved {
        name: String,
    },
    TemplateCreated {
        name: String,
        config: Value,
    },
    /// `update-template`: documented, never emitted by any server version so far.
    TemplateUpdated {
        name: String,
        config: Value,
    },
    /// `remove-template`. Also fired by the server for names that were no template.
    TemplateRemoved {
        name: String,
    },
    /// `create-schema` (16.1+).
    SchemaCreated {
        name: String,
        proto: String,
        errors: Option<String>,
    },
    SchemaUpdated {
        name: String,
        proto: String,
        errors: Option<String>,
    },
    SchemaRemoved {
        name: String,
    },
    /// `create-counter` (16.2+, only on the node that handled the create).
    CounterCreated {
        name: String,
        config: CounterConfig,
    },
    CounterRemoved {
        name: String,
    },
    /// A script task created or replaced (from [`feeds`]: no server version has task events).
    TaskUpdated {
        name: String,
        script: String,
    },
    TaskRemoved {
        name: String,
    },
    /// An event this client does not know, passed through.
    Unknown {
        event: String,
        data: String,
    },
    /// A known event whose payload could not be decoded, passed through with the reason.
    Undecodable {
        event: String,
        data: String,
        reason: String,
    },
}

impl ConfigEvent {
    /// The object kind and name, for known, decodable events.
    pub fn object(&self) -> Option<(EventKind, &str)> {
        use ConfigEvent::*;
        Some(match self {
            CacheCreated { name, .. } | CacheUpdated { name, .. } | CacheRemoved { name } => {
                (EventKind::Cache, name)
            }
            TemplateCreated { name, .. }
            | TemplateUpdated { name, .. }
            | TemplateRemoved { name } => (EventKind::Template, name),
            SchemaCreated { name, .. } | SchemaUpdated { name, .. } | SchemaRemoved { name } => {
                (EventKind::Schema, name)
            }
            CounterCreated { name, .. } | CounterRemoved { name } => (EventKind::Counter, name),
            TaskUpdated { name, .. } | TaskRemoved { name } => (EventKind::Task, name),
            Unknown { .. } | Undecodable { .. } => return None,
        })
    }

    /// Whether the event says the object is gone.
    pub fn is_removal(&self) -> bool {
        matches!(
            self,
            ConfigEvent::CacheRemoved { .. }
                | ConfigEvent::TemplateRemoved { .. }
                | ConfigEvent::SchemaRemoved { .. }
                | ConfigEvent::CounterRemoved { .. }
                | ConfigEvent::TaskRemoved { .. }
        )
    }

    /// Decodes one SSE frame received with `Accept: application/json`. Never fails: unknown or
    /// malformed frames become [`ConfigEvent::Unknown`] / [`ConfigEvent::Undecodable`].
    pub fn decode(event: &str, data: &str) -> ConfigEvent {
        match decode_known(event, data) {
            Some(Ok(e)) => e,
            Some(Err(reason)) => ConfigEvent::Undecodable {
                event: event.to_owned(),
                data: data.to_owned(),
                reason,
            },
            None => ConfigEvent::Unknown {
                event: event.to_owned(),
                data: data.to_owned(),
            },
        }
    }
}

/// `{"infinispan":{"cache-container":{"caches":{"<name>":{...}}}}}` -> (name, config).
fn cache_document(data: &str) -> Result<(String, Value), String> {
    let v: Value = serde_json::from_str(data).map_err(|e| format!("not JSON: {e}"))?;
    let caches = v
        .pointer("/infinispan/cache-container/caches")
        .and_then(Value::as_object)
        .ok_or("no infinispan.cache-container.caches object")?;
    let mut it = caches.iter();
    match (it.next(), it.next()) {
        (Some((name, config)), None) => Ok((name.clone(), config.clone())),
        _ => Err(format!(
            "expected exactly one cache, found {}",
            caches.len()
        )),
    }
}

fn bare_name(data: &str) -> Result<String, String> {
    let n = data.trim();
    if n.is_empty() {
        Err("empty name".to_owned())
    } else {
        Ok(n.to_owned())
    }
}

fn schema_document(data: &str) -> Result<(String, String, Option<String>), String> {
    let v: Value = serde_json::from_str(data).map_err(|e| format!("not JSON: {e}"))?;
    let s = v.get("schema").ok_or("no schema object")?;
    let name = s
        .get("name")
        .and_then(Value::as_str)
        .ok_or("schema without name")?
        .to_owned();
    let proto = s
        .get("proto")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let errors = s
        .get("errors")
        .and_then(Value::as_str)
        .filter(|e| !e.is_empty())
        .map(str::to_owned);
    Ok((name, proto, errors))
}

fn counter_document(data: &str) -> Result<(String, CounterConfig), String> {
    let v: Value = serde_json::from_str(data).map_err(|e| format!("not JSON: {e}"))?;
    let name = v
        .as_object()
        .and_then(|o| o.values().next())
        .and_then(|inner| inner.get("name"))
        .and_then(Value::as_str)
        .ok_or("counter without name")?
        .to_owned();
    Ok((name, CounterConfig::from_json(&v)?))
}

fn decode_known(event: &str, data: &str) -> Option<Result<ConfigEvent, String>> {
    use ConfigEvent::*;
    Some(match event {
        "create-cache" => cache_document(data).map(|(name, config)| CacheCreated { name, config }),
        "update-cache" => cache_document(data).map(|(name, config)| CacheUpdated { name, config }),
        "remove-cache" => bare_name(data).map(|name| CacheRemoved { name }),
        "create-template" => {
            cache_document(data).map(|(name, config)| TemplateCreated { name, config })
        }
        "update-template" => {
            cache_document(data).map(|(name, config)| TemplateUpdated { name, config })
        }
        "remove-template" => bare_name(data).map(|name| TemplateRemoved { name }),
        "create-schema" => schema_document(data).map(|(name, proto, errors)| SchemaCreated {
            name,
            proto,
            errors,
        }),
        "update-schema" => schema_document(data).map(|(name, proto, errors)| SchemaUpdated {
            name,
            proto,
            errors,
        }),
        "remove-schema" => bare_name(data).map(|name| SchemaRemoved { name }),
        "create-counter" => {
            counter_document(data).map(|(name, config)| CounterCreated { name, config })
        }
        "remove-counter" => bare_name(data).map(|name| CounterRemoved { name }),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::CounterStorage;
    use serde_json::json;

    #[test]
    fn decodes_the_servers_payloads() {
        let e = ConfigEvent::decode(
            "create-cache",
            r#"{"infinispan":{"cache-container":{"caches":{"a/b c":{"distributed-cache":{"mode":"SYNC"}}}}}}"#,
        );
        assert_eq!(
            e,
            ConfigEvent::CacheCreated {
                name: "a/b c".into(),
                config: json!({"distributed-cache":{"mode":"SYNC"}})
            }
        );
        assert_eq!(e.object(), Some((EventKind::Cache, "a/b c")));
        assert_eq!(
            ConfigEvent::decode("remove-template", "t1\n"),
            ConfigEvent::TemplateRemoved { name: "t1".into() }
        );
        assert_eq!(
            ConfigEvent::decode(
                "create-schema",
                r#"{"schema":{"name":"a.proto","errors":"","proto":"message A {}"}}"#
            ),
            ConfigEvent::SchemaCreated {
                name: "a.proto".into(),
                proto: "message A {}".into(),
                errors: None
            }
        );
        assert_eq!(
            ConfigEvent::decode(
                "create-counter",
                r#"{"strong-counter":{"name":"c","initial-value":0,"storage":"VOLATILE","upper-bound":100}}"#
            ),
            ConfigEvent::CounterCreated {
                name: "c".into(),
                config: CounterConfig::Strong {
                    initial_value: 0,
                    storage: CounterStorage::Volatile,
                    lower_bound: None,
                    upper_bound: Some(100),
                    lifespan: None
                }
            }
        );
    }

    #[test]
    fn unknown_and_malformed_pass_through() {
        assert!(matches!(
            ConfigEvent::decode("lifecycle-event", "x"),
            ConfigEvent::Unknown { .. }
        ));
        assert!(matches!(
            ConfigEvent::decode("create-cache", "infinispan:\n  cacheContainer:"),
            ConfigEvent::Undecodable { .. }
        ));
        assert!(matches!(
            ConfigEvent::decode("remove-cache", "  "),
            ConfigEvent::Undecodable { .. }
        ));
        assert_eq!(ConfigEvent::decode("nope", "").object(), None);
    }
}
