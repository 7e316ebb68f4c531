//! Caches: list, exists, configuration (JSON/YAML/XML), create (document or template), update,
//! delete, single mutable attributes, and the server's semantic compare and format conversion.

use std::collections::BTreeMap;

use bytes::Bytes;
use http::{HeaderName, Method};
use serde::Deserialize;

use crate::client::{Client, Req};
use crate::error::{Error, from_response};
use crate::names::encode;

/// The server's code for a cache listed but gone when looked up (a race with a removal).
const LIST_RACE_CODE: &str = "ISPN000436";
/// How often `list_caches` tries when it meets that race.
const LIST_RACE_ATTEMPTS: u32 = 5;

/// The three configuration formats the server reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConfigFormat {
    Json,
    Yaml,
    Xml,
}

impl ConfigFormat {
    pub fn media_type(self) -> &'static str {
        match self {
            ConfigFormat::Json => "application/json",
            ConfigFormat::Yaml => "application/yaml",
            ConfigFormat::Xml => "application/xml",
        }
    }

    /// Guesses the format of a document by its first significant character.
    pub fn detect(text: &str) -> ConfigFormat {
        match text.trim_start().chars().next() {
            Some('{') => ConfigFormat::Json,
            Some('<') => ConfigFormat::Xml,
            _ => ConfigFormat::Yaml,
        }
    }
}

/// A configuration document in one format, as the user wrote it or the server returned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigDocument {
    pub format: ConfigFormat,
    pub text: String,
}

impl ConfigDocument {
    pub fn new(format: ConfigFormat, text: impl Into<String>) -> Self {
        ConfigDocument {
            format,
            text: text.into(),
        }
    }
    pub fn json(text: impl Into<String>) -> Self {
        Self::new(ConfigFormat::Json, text)
    }
    pub fn yaml(text: impl Into<String>) -> Self {
        Self::new(ConfigFormat::Yaml, text)
    }
    pub fn xml(text: impl Into<String>) -> Self {
        Self::new(ConfigFormat::Xml, text)
    }
    /// A document whose format is detected from its text.
    pub fn detect(text: impl Into<String>) -> Self {
        let text = text.into();
        Self::new(ConfigFormat::detect(&text), text)
    }
}

/// Options of cache creation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CreateCacheOptions {
    /// `Flags: VOLATILE`: not persisted in the server's global state (gone after a restart).
    pub volatile: bool,
}

/// Result of the server's semantic comparison of two configurations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Comparison {
    Equal,
    /// Different; the server's reason lines when it gave any (it does for incompatible
    /// attributes, not for plain value differences).
    Different {
        reason: Vec<String>,
    },
}

/// One mutable attribute of a running cache, as `?action=get-mutable-attributes&full=true`
/// reports it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MutableAttribute {
    /// The current value as the server's JSON: a string for time quantities (`"15s"`,
    /// `"1000"`), numbers, booleans, arrays for sets, `null` when unset.
    pub value: serde_json::Value,
    /// The server's type name: `timequantity`, `long`, `integer`, `boolean`, `string`, `set`,
    /// or an enum's lower-cased class name (`indexstartupmode`).
    #[serde(rename = "type")]
    pub kind: String,
    /// The allowed values of an enum attribute.
    #[serde(default)]
    pub universe: Option<Vec<String>>,
}

pub(crate) fn cache_path(name: &str) -> String {
    format!("/rest/v2/caches/{}", encode(name))
}

/// A `multipart/form-data` body of plain fields (no file names: the server's compare
/// handler only accepts attributes).
pub(crate) fn multipart(parts: &[(&str, &str, &[u8])]) -> Result<(String, Bytes), Error> {
    let boundary = format!("----infinispan-rest-{}", crate::random::token()?);
    let mut body = Vec::new();
    for (name, content_type, data) in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        body.extend_from_slice(
            format!("Content-Disposition: form-data; name=\"{name}\"\r\n").as_bytes(),
        );
        body.extend_from_slice(format!("Content-Type: {content_type}\r\n\r\n").as_bytes());
        body.extend_from_slice(data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    Ok((
        format!("multipart/form-data; boundary={boundary}"),
        Bytes::from(body),
    ))
}

impl Client {
    /// Names of every cache, internal ones (`___protobuf_metadata`...) included.
    /// Names of every cache (internal ones included).
    ///
    /// The server builds this list from its cache names and then looks each one up: a cache
    /// or template removed in between makes the whole call fail with 400 `ISPN000436` ("has
    /// been requested, but no matching cache configuration exists"), seen on 16.0.7 while
    /// another client removed caches. The list is read-only, so that race is retried a few
    /// times before it is reported.
    pub async fn list_caches(&self) -> Result<Vec<String>, Error> {
        let what = "list caches";
        let mut attempt = 1;
        loop {
            match self.expect(Req::get("/rest/v2/caches"), what, &[200]).await {
                Ok(response) => return response.json(what),
                Err(Error::Rejected {
                    code: Some(code), ..
                }) if code == LIST_RACE_CODE && attempt < LIST_RACE_ATTEMPTS => {
                    attempt += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    pub async fn cache_exists(&self, name: &str) -> Result<bool, Error> {
        let what = format!("check cache '{name}'");
        let r = self
            .call(Req::new(Method::HEAD, cache_path(name)), &what)
            .await?;
        match r.status.as_u16() {
            200 | 204 => Ok(true),
            404 => Ok(false),
            _ => Err(from_response(&what, r.status, &r.text())),
        }
    }

    /// The configuration of a cache or template, in `format`. JSON is `{"<name>":{...}}`.
    pub async fn cache_config(
        &self,
        name: &str,
        format: ConfigFormat,
    ) -> Result<ConfigDocument, Error> {
        let what = format!("read the configuration of '{name}'");
        let r = self
            .expect(
                Req::get(format!("{}?action=config", cache_path(name))).accept(format.media_type()),
                &what,
                &[200],
            )
            .await?;
        Ok(ConfigDocument::new(format, r.text()))
    }

    /// Creates a cache from a configuration document (JSON, YAML or XML).
    pub async fn create_cache(
        &self,
        name: &str,
        config: &ConfigDocument,
        options: CreateCacheOptions,
    ) -> Result<(), Error> {
        let what = format!("create cache '{name}'");
        let mut req = Req::new(Method::POST, cache_path(name))
            .body(config.format.media_type(), config.text.clone());
        if options.volatile {
            req = req.header(HeaderName::from_static("flags"), "VOLATILE");
        }
        self.expect(req, &what, &[200, 204]).await.map(|_| ())
    }

    /// Creates a cache from a template name.
    pub async fn create_cache_from_template(
        &self,
        name: &str,
        template: &str,
        options: CreateCacheOptions,
    ) -> Result<(), Error> {
        let what = format!("create cache '{name}' from template '{template}'");
        let mut req = Req::new(
            Method::POST,
            format!("{}?template={}", cache_path(name), encode(template)),
        );
        if options.volatile {
            req = req.header(HeaderName::from_static("flags"), "VOLATILE");
        }
        self.expect(req, &what, &[200, 204]).await.map(|_| ())
    }

    /// Replaces the configuration of an existing cache. Changed immutable attributes are
    /// [`Error::Rejected`] with one server line per attribute. The server's PUT is an upsert;
    /// this call refuses to create (`NotFound`), so a vanished cache is not silently revived.
    /// Note: every PUT fires `update-cache`, even an identical one.
    pub async fn update_cache(&self, name: &str, config: &ConfigDocument) -> Result<(), Error> {
        if !self.cache_exists(name).await? {
            return Err(Error::NotFound {
                what: format!("cache '{name}'"),
            });
        }
        let what = format!("update cache '{name}'");
        let req = Req::new(Method::PUT, cache_path(name))
            .body(config.format.media_type(), config.text.clone());
        self.expect(req, &what, &[200, 204]).await.map(|_| ())
    }

    pub async fn delete_cache(&self, name: &str) -> Result<(), Error> {
        let what = format!("delete cache '{name}'");
        self.delete(cache_path(name), &what, &[200, 204]).await
    }

    /// Names of the attributes of a running cache that can change without recreating it
    /// (e.g. `expiration.lifespan`, `memory.max-count`, `jmx-statistics.statistics`; 18 on 16.0.7
    /// for local and distributed caches). The server's list, never hard-coded here.
    pub async fn mutable_attribute_names(&self, cache: &str) -> Result<Vec<String>, Error> {
        let what = format!("list the mutable attributes of cache '{cache}'");
        self.expect(
            Req::get(format!(
                "{}?action=get-mutable-attributes",
                cache_path(cache)
            ))
            .accept("application/json"),
            &what,
            &[200],
        )
        .await?
        .json(&what)
    }

    /// Every mutable attribute of a running cache with its value and type
    /// (`?action=get-mutable-attributes&full=true`).
    pub async fn mutable_attributes(
        &self,
        cache: &str,
    ) -> Result<BTreeMap<String, MutableAttribute>, Error> {
        let what = format!("read the mutable attributes of cache '{cache}'");
        self.expect(
            Req::get(format!(
                "{}?action=get-mutable-attributes&full=true",
                cache_path(cache)
            ))
            .accept("application/json"),
            &what,
            &[200],
        )
        .await?
        .json(&what)
    }

    /// The value of one mutable attribute as the server prints it (`"1000"`, `"10s"`,
    /// `"false"`, `"[a, b]"` for sets). An immutable attribute is [`Error::Rejected`] with
    /// `ISPN012035`, an unknown one with `ISPN000960`.
    pub async fn mutable_attribute(&self, cache: &str, attribute: &str) -> Result<String, Error> {
        let what = format!("read attribute '{attribute}' of cache '{cache}'");
        let r = self
            .expect(
                Req::get(format!(
                    "{}?action=get-mutable-attribute&attribute-name={}",
                    cache_path(cache),
                    encode(attribute)
                ))
                .accept("application/json"),
                &what,
                &[200],
            )
            .await?;
        // a JSON string on 16.0.7; anything else is passed through as its JSON text
        Ok(match serde_json::from_slice::<serde_json::Value>(&r.body) {
            Ok(serde_json::Value::String(s)) => s,
            Ok(v) => v.to_string(),
            Err(_) => r.text(),
        })
    }

    /// Changes one mutable attribute of a running cache, cluster-wide and persistently (the
    /// server fires `update-cache`, even when the value is unchanged). The value is in the
    /// server's syntax (`5000`, `10s`, `false`, an enum constant). Everything the server refuses
    /// is [`Error::Rejected`]: an invalid value (400 `ISPN000958`, `ISPN000956`...), an unknown
    /// attribute (400 `ISPN000960`), an immutable one (500 `ISPN000962: Cannot modify protected
    /// attribute`, or a 400 about the value when the server fails to convert it first).
    ///
    /// Caveat measured on 16.0.7: a change the server rejects because it would alter an
    /// immutable attribute (`memory.max-count` on a cache without memory configuration alters
    /// `memory.when-full`: 400 `ISPN000963`) may still leave the new value in the running
    /// configuration. Read back after a rejection.
    pub async fn set_mutable_attribute(
        &self,
        cache: &str,
        attribute: &str,
        value: &str,
    ) -> Result<(), Error> {
        let what = format!("set attribute '{attribute}' of cache '{cache}' to '{value}'");
        match self
            .expect(
                Req::new(
                    Method::POST,
                    format!(
                        "{}?action=set-mutable-attribute&attribute-name={}&attribute-value={}",
                        cache_path(cache),
                        encode(attribute),
                        encode(value)
                    ),
                ),
                &what,
                &[200, 204],
            )
            .await
        {
            Ok(_) => Ok(()),
            // 16.0.7 sometimes answers with an empty 400 (e.g. a value it cannot parse)
            Err(Error::Rejected {
                what,
                status,
                code,
                lines,
            }) if lines.is_empty() => Err(Error::Rejected {
                what,
                status,
                code,
                lines: vec![format!(
                    "no reason given by the server: is '{attribute}' mutable (see \
                     mutable_attribute_names) and the value valid?"
                )],
            }),
            Err(e) => Err(e),
        }
    }

    /// The server's semantic comparison (formats may differ). With `ignore_mutable`, only
    /// differences in immutable attributes count.
    pub async fn compare_configs(
        &self,
        a: &ConfigDocument,
        b: &ConfigDocument,
        ignore_mutable: bool,
    ) -> Result<Comparison, Error> {
        let what = "compare configurations";
        let (ct, body) = multipart(&[
            ("one", a.format.media_type(), a.text.as_bytes()),
            ("two", b.format.media_type(), b.text.as_bytes()),
        ])?;
        let path = if ignore_mutable {
            "/rest/v2/caches?action=compare&ignoreMutable=true"
        } else {
            "/rest/v2/caches?action=compare"
        };
        let r = self
            .call(Req::new(Method::POST, path).body(&ct, body), what)
            .await?;
        match r.status.as_u16() {
            204 | 200 => Ok(Comparison::Equal),
            409 => Ok(Comparison::Different {
                reason: crate::error::message_lines(&r.text()),
            }),
            _ => Err(from_response(what, r.status, &r.text())),
        }
    }

    /// Converts a configuration document to another format (the server's own converter).
    pub async fn convert_config(
        &self,
        doc: &ConfigDocument,
        to: ConfigFormat,
    ) -> Result<ConfigDocument, Error> {
        let what = "convert a configuration";
        let r = self
            .expect(
                Req::new(Method::POST, "/rest/v2/caches?action=convert")
                    .body(doc.format.media_type(), doc.text.clone())
                    .accept(to.media_type()),
                what,
                &[200],
            )
            .await?;
        Ok(ConfigDocument::new(to, r.text()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_formats() {
        assert_eq!(ConfigFormat::detect("  {\"a\":1}"), ConfigFormat::Json);
        assert_eq!(ConfigFormat::detect("<local-cache/>"), ConfigFormat::Xml);
        assert_eq!(ConfigFormat::detect("localCache:\n"), ConfigFormat::Yaml);
    }

    #[test]
    fn cache_paths_are_encoded() {
        assert_eq!(cache_path("a/b+c d"), "/rest/v2/caches/a%2Fb%2Bc%20d");
    }

    #[test]
    fn multipart_shape() {
        let (ct, body) = multipart(&[("one", "application/json", b"{}")]).expect("a token");
        let boundary = ct.split("boundary=").nth(1).unwrap_or_default().to_owned();
        let text = String::from_utf8_lossy(&body);
        assert!(text.starts_with(&format!("--{boundary}\r\n")));
        assert!(text.contains("name=\"one\"\r\nContent-Type: application/json\r\n\r\n{}\r\n"));
        assert!(text.ends_with(&format!("--{boundary}--\r\n")));
        assert!(!text.contains("filename"));
    }
}
