//! `hearth serve` answers `/v1/embeddings` with an installed embedding model named in the
//! request (the engine's tiny Qwen3 embedding fixture, registered as the catalog's
//! Qwen3-Embedding-0.6B would be), does not list it as a chat model, and names it when a request
//! names a model it does not have.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;

use serde_json::{json, Value};

const NAME: &str = "Qwen3-Embedding-0.6B";

/// One HTTP/1.1 request on its own connection: the status and the JSON body.
fn request(address: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut stream = TcpStream::connect(address).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").expect("headers, then a body");
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let json = serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    (status, json)
}

/// Marks the imported model with the catalog id a download of Qwen3-Embedding-0.6B records.
fn mark_as_catalog_embedding_model(home: &Path) {
    let registry = home.join("data/hearth/model_list.json");
    let mut json: Value = serde_json::from_str(&std::fs::read_to_string(&registry).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", registry.display()));
    fn mark(value: &mut Value) {
        match value {
            Value::Object(map) => {
                if map.contains_key("imported_from") {
                    map.insert("catalog_id".into(), "qwen3-embedding-0.6b".into());
                }
                map.values_mut().for_each(mark);
            }
            Value::Array(items) => items.iter_mut().for_each(mark),
            _ => {}
        }
    }
    mark(&mut json);
    std::fs::write(&registry, json.to_string()).unwrap();
}

#[test]
fn an_installed_embedding_model_is_served_by_its_name_and_not_as_a_chat_model() {
    let home = tempfile::tempdir().unwrap();
    common::import_tiny_qwen3_embedding(home.path(), NAME);
    mark_as_catalog_embedding_model(home.path());

    let mut serve = common::hearth(home.path());
    serve
        .args(["serve", "--port", "0"])
        .env_remove("HEARTH_EMBEDDING_MODEL");
    let served = common::serve(serve);

    let (status, value) = request(
        served.address(),
        "POST",
        "/v1/embeddings",
        Some(json!({"model": NAME, "input": ["The train leaves at nine.", "x"]})),
    );
    assert_eq!(status, 200, "{value}");
    assert_eq!(value["model"], NAME);
    let vector = value["data"][0]["embedding"].as_array().unwrap();
    assert_eq!(vector.len(), 64, "the Qwen3 fixture's hidden size");

    let (status, value) = request(served.address(), "GET", "/v1/models", None);
    assert_eq!(status, 200, "{value}");
    assert!(
        !value.to_string().contains(NAME),
        "an embedding model is not listed to chat with: {value}"
    );

    let (status, value) = request(
        served.address(),
        "POST",
        "/v1/embeddings",
        Some(json!({"model": "nonesuch", "input": "x"})),
    );
    assert_eq!(status, 404, "{value}");
    let message = value["error"]["message"].as_str().unwrap();
    assert!(message.contains(NAME), "names the installed one: {message}");
}
