//! The "sees pictures" switch of the remote server's models, through the app against a small
//! loopback server that answers like Ollama: the switch saved with the server's settings, the
//! listed models marked by the server's word or the switch, and the model in use opened again
//! when its switch changes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;

use super::*;
use crate::home::Home;

/// Serves `/v1/models` (`models`) and Ollama's `/api/show` (`vision` among the capabilities of
/// the `seeing` ones) on 127.0.0.1 for the rest of the process; returns its address.
fn ollama(models: &[&str], seeing: &[&str]) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let models: Vec<String> = models.iter().map(|m| m.to_string()).collect();
    let seeing: Vec<String> = seeing.iter().map(|m| m.to_string()).collect();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
            let mut length = 0;
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = header.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let (status, reply) = match path.as_str() {
                "/v1/models" => (
                    200,
                    serde_json::json!({
                        "object": "list",
                        "data": models.iter().map(|m| serde_json::json!({"id": m})).collect::<Vec<_>>(),
                    }),
                ),
                "/api/show" => {
                    let asked: serde_json::Value =
                        serde_json::from_slice(&body).unwrap_or_default();
                    let model = asked["model"].as_str().unwrap_or_default();
                    let mut capabilities = vec!["completion"];
                    if seeing.iter().any(|m| m == model) {
                        capabilities.push("vision");
                    }
                    (200, serde_json::json!({ "capabilities": capabilities }))
                }
                _ => (404, serde_json::json!({ "error": "not found" })),
            };
            let reply = reply.to_string();
            let _ = write!(
                conn,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    url
}

fn app(dir: &Path) -> App {
    App::open(Home {
        data_dir: dir.join("data"),
        config_dir: dir.join("config"),
        state_dir: dir.join("state"),
        builtin: None,
        system_root: "/".into(),
    })
    .unwrap()
}

fn seeing(models: &[RemoteModel]) -> Vec<(&str, bool, bool)> {
    models
        .iter()
        .map(|m| (m.name.as_str(), m.server_sees, m.backend.sees_pictures))
        .collect()
}

#[test]
fn the_switch_is_saved_with_the_servers_settings() {
    let tmp = tempfile::tempdir().unwrap();
    let app = app(tmp.path());
    let url = ollama(&["a", "b"], &[]);
    let saved = app
        .save_remote_server(&url, Some("sk-1"), None, Some(vec!["b".into(), " ".into()]))
        .unwrap();
    assert_eq!(saved.sees_pictures, ["b"], "a blank name is not a model");
    // One file holds it all, as the CLI reads it too.
    let config = RemoteConfig::load(&tmp.path().join("config"))
        .unwrap()
        .unwrap();
    assert!(config.marked_seeing("b") && !config.marked_seeing("a"));
    assert_eq!(config.api_key.unwrap().expose(), "sk-1");

    let kept = app
        .save_remote_server(&url, None, Some("a".into()), None)
        .unwrap();
    assert_eq!(kept.sees_pictures, ["b"], "None keeps the switches");
    assert_eq!(app.remote_server().unwrap().unwrap(), kept);
    let cleared = app
        .save_remote_server(&url, None, None, Some(Vec::new()))
        .unwrap();
    assert!(cleared.sees_pictures.is_empty());
    app.save_remote_server(&url, None, None, Some(vec!["a".into()]))
        .unwrap();
    let other = app
        .save_remote_server("http://127.0.0.1:9", None, None, None)
        .unwrap();
    assert!(
        other.sees_pictures.is_empty(),
        "another server's models are not marked by this one's switches"
    );
}

#[test]
fn a_listed_model_sees_by_the_servers_word_or_the_switch() {
    let tmp = tempfile::tempdir().unwrap();
    let app = app(tmp.path());
    let url = ollama(&["llava", "llama3", "qwen"], &["llava"]);
    let listed = app.test_remote_server(&url, None).unwrap();
    assert_eq!(
        seeing(&listed),
        [
            ("llava", true, true),
            ("llama3", false, false),
            ("qwen", false, false)
        ]
    );
    assert!(listed
        .iter()
        .all(|m| m.backend.kind == BackendKind::Remote && m.backend.usable));

    // The switch adds to the server's word and never takes it away.
    app.save_remote_server(&url, None, None, Some(vec!["llama3".into()]))
        .unwrap();
    let listed = app.test_remote_server(&url, None).unwrap();
    assert_eq!(
        seeing(&listed),
        [
            ("llava", true, true),
            ("llama3", false, true),
            ("qwen", false, false)
        ]
    );
}

#[test]
fn the_model_in_use_follows_its_switch() {
    let tmp = tempfile::tempdir().unwrap();
    let app = app(tmp.path());
    let url = ollama(&["llama3"], &[]);
    app.save_remote_server(&url, None, None, None).unwrap();
    let progress = crate::loading::logged_progress();
    let status = app
        .select_model("llama3", Some(BackendKind::Remote), false, &progress)
        .unwrap();
    assert!(!status.sees_pictures);
    let in_use = |app: &App| app.model.lock().unwrap().as_ref().unwrap().sees_pictures();

    app.save_remote_server(&url, None, None, Some(vec!["llama3".into()]))
        .unwrap();
    assert!(in_use(&app), "switched on: it takes pictures now");
    app.save_remote_server(&url, None, None, Some(Vec::new()))
        .unwrap();
    assert!(!in_use(&app), "switched off again");
}
