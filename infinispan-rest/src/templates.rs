//! Templates: list, get, create, remove.
//!
//! REST v2 has no template endpoints (and 16.0 has no REST v3). Create and remove run the
//! server's admin tasks `@@template@create` / `@@template@remove` through REST task execution,
//! which works on 16.0.7 (see docs/server-api.md). Limits of that route, all handled here:
//! - parameters are read from the query string only, and the server's request line is capped
//!   at 4096 bytes, so a template configuration must fit in the URL ([`Error::TooLarge`]
//!   otherwise; JSON is minified first);
//! - `@@template@remove` succeeds (and fires `remove-template`) for unknown names and for
//!   templates still used by caches, so removal checks existence first;
//! - templates cannot be updated (the server has no such operation): remove and re-create.

use http::Method;
use serde::Deserialize;

use crate::caches::{ConfigDocument, ConfigFormat};
use crate::client::{Client, Req};
use crate::error::{Error, from_response};
use crate::names::encode;

/// The server's request-line limit (Netty's default `maxInitialLineLength`).
pub const MAX_REQUEST_LINE: usize = 4096;

/// A template and its configuration as the server lists it: `{"<name>": {...}}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Template {
    pub name: String,
    pub configuration: serde_json::Value,
}

impl Client {
    /// Every template (the server hides internal ones except `org.infinispan.*`).
    pub async fn list_templates(&self) -> Result<Vec<Template>, Error> {
        let what = "list templates";
        self.expect(
            Req::get("/rest/v2/container/cache-configs/templates"),
            what,
            &[200],
        )
        .await?
        .json(what)
    }

    /// One template's configuration as JSON, without the name wrapper of the listing
    /// (`{"distributed-cache-configuration":{...}}`); `None` when the server has no such
    /// template.
    pub async fn template_definition(
        &self,
        name: &str,
    ) -> Result<Option<serde_json::Value>, Error> {
        Ok(self
            .list_templates()
            .await?
            .into_iter()
            .find(|t| t.name == name)
            .map(|t| {
                t.configuration
                    .get(name)
                    .cloned()
                    .unwrap_or(t.configuration)
            }))
    }

    pub async fn template_exists(&self, name: &str) -> Result<bool, Error> {
        Ok(self.list_templates().await?.iter().any(|t| t.name == name))
    }

    /// A template's configuration in `format`.
    pub async fn template_config(
        &self,
        name: &str,
        format: ConfigFormat,
    ) -> Result<ConfigDocument, Error> {
        if !self.template_exists(name).await? {
            return Err(Error::NotFound {
                what: format!("template '{name}'"),
            });
        }
        self.cache_config(name, format).await
    }

    async fn admin_task(
        &self,
        task: &str,
        params: &[(&str, &str)],
        what: &str,
    ) -> Result<(), Error> {
        let mut path = format!("/rest/v2/tasks/{task}?action=exec");
        for (k, v) in params {
            path.push_str(&format!("&param.{k}={}", encode(v)));
        }
        let line = "POST ".len() + self.base_path_len() + path.len() + " HTTP/1.1".len();
        if line > MAX_REQUEST_LINE {
            return Err(Error::TooLarge {
                what: what.to_owned(),
                actual: line,
                limit: MAX_REQUEST_LINE,
            });
        }
        let r = self.call(Req::new(Method::POST, path), what).await?;
        match r.status.as_u16() {
            200 | 204 => Ok(()),
            _ => {
                let text = r.text();
                if text.contains("ISPN027002") {
                    return Err(Error::Unsupported {
                        what: what.to_owned(),
                        reason: format!("the server has no admin task {task}"),
                    });
                }
                Err(from_response(what, r.status, &text))
            }
        }
    }

    /// Creates a template. [`Error::AlreadyExists`] if the name is taken (templates are
    /// immutable), [`Error::TooLarge`] if the configuration does not fit in the request line.
    pub async fn create_template(&self, name: &str, config: &ConfigDocument) -> Result<(), Error> {
        let what = format!("create template '{name}'");
        let text = match config.format {
            ConfigFormat::Json => serde_json::from_str::<serde_json::Value>(&config.text)
                .map(|v| v.to_string())
                .map_err(|e| Error::Rejected {
                    what: what.clone(),
                    status: 0,
                    code: None,
                    lines: vec![format!("invalid JSON: {e}")],
                })?,
            _ => config.text.clone(),
        };
        self.admin_task(
            "@@template@create",
            &[("name", name), ("configuration", &text)],
            &what,
        )
        .await
    }

    /// Removes a template. [`Error::NotFound`] if there is none of that name. The server does
    /// not refuse templates still used by caches: callers check dependants first (design D1).
    pub async fn remove_template(&self, name: &str) -> Result<(), Error> {
        if !self.template_exists(name).await? {
            return Err(Error::NotFound {
                what: format!("template '{name}'"),
            });
        }
        let what = format!("remove template '{name}'");
        self.admin_task("@@template@remove", &[("name", name)], &what)
            .await
    }
}
