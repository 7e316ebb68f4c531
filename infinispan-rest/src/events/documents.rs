//! The server's current documents of the kinds one stream carries, in one request each: what
//! a drift check (in the resources operator) compares with what the stream's events said.
//!
//! - Caches and templates: `GET /rest/v2/container/cache-configs`, every definition as
//!   `[{"name":..,"configuration":{"<name>":{...}}}]` (internal caches left out by the server).
//!   The inner document is the one the config events carry (checked on 16.0.7); a template is
//!   told from a cache by its element (`*-configuration`, the server's own template form).
//! - Schemas and tasks: the entries of their internal cache, as their feeds list them on
//!   every connect.
//! - Counters: no documents (a counter's definition cannot change).
//!
//! Every document comes as the update event it would be ([`ConfigEvent::CacheUpdated`],
//! [`ConfigEvent::TemplateUpdated`], [`ConfigEvent::SchemaCreated`],
//! [`ConfigEvent::TaskUpdated`]), so that a consumer takes it the way it takes events.

use serde::Deserialize;
use serde_json::Value;

use super::ConfigEvent;
use super::feeds::EntryFeed;
use crate::client::{Client, Req};
use crate::error::Error;

/// Whose documents: one per stream that can drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Documents {
    /// Caches and templates (the config event stream).
    Configs,
    /// Protobuf schemas (the schema feed).
    Schemas,
    /// Script tasks (the task feed).
    Tasks,
}

/// The suffix of a template's element (`distributed-cache-configuration`).
const TEMPLATE_SUFFIX: &str = "-configuration";

#[derive(Deserialize)]
struct Definition {
    name: String,
    configuration: Value,
}

impl Client {
    /// The server's documents of `of` now, as update events (see the module docs).
    pub async fn current_documents(&self, of: Documents) -> Result<Vec<ConfigEvent>, Error> {
        let feed = match of {
            Documents::Configs => return self.cache_configs().await,
            Documents::Schemas => EntryFeed::Schemas,
            Documents::Tasks => EntryFeed::Tasks,
        };
        Ok(feed.snapshot(self.cache_entries(feed.cache()).await?))
    }

    async fn cache_configs(&self) -> Result<Vec<ConfigEvent>, Error> {
        let what = "list the cache and template definitions";
        let definitions: Vec<Definition> = self
            .expect(Req::get("/rest/v2/container/cache-configs"), what, &[200])
            .await?
            .json(what)?;
        Ok(definitions.into_iter().map(definition_event).collect())
    }
}

/// One listed definition as the update event of its cache or template.
fn definition_event(definition: Definition) -> ConfigEvent {
    let Definition {
        name,
        mut configuration,
    } = definition;
    // `{"<name>": {...}}` -> `{...}` (a document without the wrapper is taken as it is).
    let config = match configuration.get_mut(&name) {
        Some(inner) => inner.take(),
        None => configuration,
    };
    let template = config
        .as_object()
        .is_some_and(|element| element.keys().any(|key| key.ends_with(TEMPLATE_SUFFIX)));
    if template {
        ConfigEvent::TemplateUpdated { name, config }
    } else {
        ConfigEvent::CacheUpdated { name, config }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn listed(text: &str) -> Vec<ConfigEvent> {
        let definitions: Vec<Definition> = serde_json::from_str(text).expect("valid listing");
        definitions.into_iter().map(definition_event).collect()
    }

    #[test]
    fn caches_and_templates_come_as_their_update_events() {
        // As 16.0.7 lists them.
        let events = listed(
            r#"[{"name":"drift2","configuration":{"drift2":{"distributed-cache":{"mode":"SYNC","memory":{"max-count":"1000"}}}}},
                {"name":"org.infinispan.RESP_LOCAL","configuration":{"org.infinispan.RESP_LOCAL":{"local-cache-configuration":{"statistics":true}}}}]"#,
        );
        assert_eq!(
            events,
            vec![
                ConfigEvent::CacheUpdated {
                    name: "drift2".to_string(),
                    config: json!({"distributed-cache":{"mode":"SYNC","memory":{"max-count":"1000"}}}),
                },
                ConfigEvent::TemplateUpdated {
                    name: "org.infinispan.RESP_LOCAL".to_string(),
                    config: json!({"local-cache-configuration":{"statistics":true}}),
                },
            ]
        );
    }

    #[test]
    fn a_document_without_its_name_wrapper_is_taken_as_it_is() {
        assert_eq!(
            listed(r#"[{"name":"c","configuration":{"local-cache":{}}}]"#),
            vec![ConfigEvent::CacheUpdated {
                name: "c".to_string(),
                config: json!({"local-cache":{}}),
            }]
        );
    }
}
