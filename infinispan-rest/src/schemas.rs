//! Protobuf schemas: list (with validation errors), get, create, create-or-replace, delete.
//! The server appends `.proto` to names lacking it; [`schema_name`] does the same.

use http::Method;
use serde::Deserialize;

use crate::client::{Client, Req};
use crate::error::Error;
use crate::names::encode;

/// A schema as listed, with its validation error if the server found one.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SchemaStatus {
    pub name: String,
    pub error: Option<SchemaError>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SchemaError {
    pub message: String,
    #[serde(default)]
    pub cause: Option<String>,
}

/// The server-side name of a schema: `.proto` appended when missing.
pub fn schema_name(name: &str) -> String {
    if name.ends_with(".proto") {
        name.to_owned()
    } else {
        format!("{name}.proto")
    }
}

fn schema_path(name: &str) -> String {
    format!("/rest/v2/schemas/{}", encode(&schema_name(name)))
}

impl Client {
    /// Every user schema with its validation status.
    pub async fn list_schemas(&self) -> Result<Vec<SchemaStatus>, Error> {
        let what = "list schemas";
        self.expect(Req::get("/rest/v2/schemas"), what, &[200])
            .await?
            .json(what)
    }

    /// The `.proto` text of a schema.
    pub async fn schema(&self, name: &str) -> Result<String, Error> {
        let what = format!("read schema '{}'", schema_name(name));
        Ok(self
            .expect(
                Req::get(schema_path(name)).accept("text/plain"),
                &what,
                &[200],
            )
            .await?
            .text())
    }

    /// Creates a schema ([`Error::AlreadyExists`] if taken). An invalid schema is stored too:
    /// the returned status carries the server's validation error.
    pub async fn create_schema(&self, name: &str, proto: &str) -> Result<SchemaStatus, Error> {
        let what = format!("create schema '{}'", schema_name(name));
        self.expect(
            Req::new(Method::POST, schema_path(name)).body("text/plain", proto.to_owned()),
            &what,
            &[200, 201],
        )
        .await?
        .json(&what)
    }

    /// Creates or replaces a schema.
    pub async fn put_schema(&self, name: &str, proto: &str) -> Result<SchemaStatus, Error> {
        let what = format!("replace schema '{}'", schema_name(name));
        self.expect(
            Req::new(Method::PUT, schema_path(name)).body("text/plain", proto.to_owned()),
            &what,
            &[200, 201],
        )
        .await?
        .json(&what)
    }

    pub async fn delete_schema(&self, name: &str) -> Result<(), Error> {
        let what = format!("delete schema '{}'", schema_name(name));
        self.delete(schema_path(name), &what, &[200, 204]).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_get_the_proto_suffix() {
        assert_eq!(schema_name("a"), "a.proto");
        assert_eq!(schema_name("a.proto"), "a.proto");
        assert_eq!(schema_path("a b/c"), "/rest/v2/schemas/a%20b%2Fc.proto");
    }
}
