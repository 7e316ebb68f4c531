//! Templates: the `Template` CR and a cache template on the server (design, issue "part 2").
//!
//! - The server object is the single-template JSON document of the events
//!   (`{"distributed-cache-configuration":{...}}`), as defined. CRs hold a cache document
//!   (`{"distributed-cache":{...}}`, YAML or XML too), which is what the server takes to create
//!   a template; the two are the same configuration, the template's element names end in
//!   `-configuration`.
//! - Created and removed through the REST client's task route (`@@template@create/remove`);
//!   the server has no update: templates are immutable (`Ready=False, reason=Immutable`, or
//!   recreated with `updates.strategy: recreate`).
//! - Equality is the server's own `compare` of the two cache documents (defaults and formats do
//!   not count, L3). Built-in `org.infinispan.*` templates are internal (E4).

use common_crds::Template;
use common_crds::common::UpdateStrategy;
use infinispan_rest::{
    Client, Comparison as ServerComparison, ConfigDocument, ConfigEvent, ConfigFormat, EventKind,
    InternalObjects,
};
use serde_json::{Map, Value, json};

use crate::engine::decision::{Comparison, Dependencies, KindCapabilities};
use crate::engine::digest::json_digest;
use crate::engine::kind::{Compared, KindAdapter, KindError, ServerChange};

/// The template adapter.
#[derive(Debug, Clone)]
pub struct TemplateAdapter {
    client: Client,
    internal: InternalObjects,
}

impl TemplateAdapter {
    pub fn new(client: Client, internal: InternalObjects) -> Self {
        Self { client, internal }
    }
}

/// `{"distributed-cache-configuration":{...}}` -> `{"distributed-cache":{...}}`: the same
/// configuration as a cache document (what the server creates templates from and compares).
pub fn as_cache_document(template: &Value) -> Value {
    match template.as_object() {
        Some(map) if map.len() == 1 => {
            let renamed: Map<String, Value> = map
                .iter()
                .map(|(kind, body)| {
                    let kind = kind.strip_suffix("-configuration").unwrap_or(kind);
                    (kind.to_string(), body.clone())
                })
                .collect();
            Value::Object(renamed)
        }
        _ => template.clone(),
    }
}

fn server_document(object: &Value) -> ConfigDocument {
    ConfigDocument::json(as_cache_document(object).to_string())
}

fn desired(cr: &Template) -> ConfigDocument {
    ConfigDocument::detect(cr.spec.template.clone())
}

impl KindAdapter for TemplateAdapter {
    type Cr = Template;
    type Object = Value;

    const EVENT_KIND: EventKind = EventKind::Template;

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

    fn change_of(&self, event: &ConfigEvent) -> Option<(String, ServerChange<Value>)> {
        match event {
            ConfigEvent::TemplateCreated { name, config }
            | ConfigEvent::TemplateUpdated { name, config } => {
                Some((name.clone(), ServerChange::Present(config.clone())))
            }
            ConfigEvent::TemplateRemoved { name } => Some((name.clone(), ServerChange::Removed)),
            _ => None,
        }
    }

    fn digest(&self, object: &Value) -> String {
        json_digest(object)
    }

    async fn read(&self, server_name: &str) -> Result<Option<Value>, KindError> {
        Ok(self.client.template_definition(server_name).await?)
    }

    async fn create(&self, server_name: &str, cr: &Template) -> Result<(), KindError> {
        Ok(self
            .client
            .create_template(server_name, &desired(cr))
            .await?)
    }

    /// Never called: templates cannot change in place (the capabilities say so).
    async fn update(&self, server_name: &str, _cr: &Template) -> Result<(), KindError> {
        Err(KindError::Invalid {
            what: format!("template '{server_name}'"),
            message: "the server cannot update a template in place".to_string(),
        })
    }

    async fn delete(&self, server_name: &str) -> Result<(), KindError> {
        match self.client.remove_template(server_name).await {
            Ok(()) | Err(infinispan_rest::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    async fn compare(&self, cr: &Template, object: &Value) -> Result<Compared, KindError> {
        let comparison = match self
            .client
            .compare_configs(&desired(cr), &server_document(object), false)
            .await?
        {
            ServerComparison::Equal => Comparison::Equal,
            ServerComparison::Different { .. } => Comparison::Different { in_place: false },
        };
        Ok(Compared {
            comparison,
            reasons: Vec::new(),
        })
    }

    async fn mirror_spec(&self, server_name: &str, object: &Value) -> Result<Value, KindError> {
        Ok(json!({
            "name": server_name,
            "template": as_cache_document(object).to_string(),
        }))
    }

    async fn spec_patch_from_server(
        &self,
        cr: &Template,
        object: &Value,
    ) -> Result<Value, KindError> {
        let format = desired(cr).format;
        let text = match format {
            ConfigFormat::Json => as_cache_document(object).to_string(),
            ConfigFormat::Yaml | ConfigFormat::Xml => {
                self.client
                    .convert_config(&server_document(object), format)
                    .await?
                    .text
            }
        };
        Ok(json!({ "template": text }))
    }

    fn update_strategy(&self, cr: &Template) -> UpdateStrategy {
        cr.spec.update_strategy()
    }

    /// Which caches use the template is not tracked yet: a recreate does not wait for them.
    fn dependencies(&self, _cr: &Template) -> Dependencies {
        Dependencies::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_document_is_the_same_cache_document() {
        assert_eq!(
            as_cache_document(&json!({"distributed-cache-configuration": {"mode": "SYNC"}})),
            json!({"distributed-cache": {"mode": "SYNC"}})
        );
        assert_eq!(
            as_cache_document(&json!({"local-cache": {}})),
            json!({"local-cache": {}})
        );
    }
}
