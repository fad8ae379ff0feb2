//! `HF_ENDPOINT` and the offline variables are read from the environment. One test in its own
//! binary, because it changes process-wide environment variables.

mod common;

use common::{repo_files, MockHub, TempDir};
use hearth_hub::{
    pull, DownloadControl, DownloadOptions, Error, HubClient, PullOutcome, PullRequest, Store,
};

#[test]
fn hf_endpoint_and_offline_variables_are_honoured() {
    let hub = MockHub::start();
    hub.add_repo("env-test/Tiny", "c0ffee", repo_files("tiny-q4nx"));
    let tmp = TempDir::new("env");
    let store = Store::at(tmp.0.clone());
    let request = PullRequest {
        query: "env-test/Tiny".into(),
        ..Default::default()
    };
    let options = DownloadOptions {
        disk_reserve: 0,
        ..Default::default()
    };

    std::env::set_var("HF_ENDPOINT", &hub.endpoint);
    std::env::set_var("HF_HUB_OFFLINE", "1");
    let client = HubClient::from_env(false);
    assert_eq!(client.endpoint(), hub.endpoint);
    let err = pull(
        &store,
        &client,
        &request,
        &options,
        &DownloadControl::new(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(err, Error::Offline { .. }), "{err}");
    assert!(hub.log().is_empty());

    std::env::remove_var("HF_HUB_OFFLINE");
    let client = HubClient::from_env(false);
    let outcome = pull(
        &store,
        &client,
        &request,
        &options,
        &DownloadControl::new(),
        &mut |_| {},
    )
    .unwrap();
    assert!(matches!(outcome, PullOutcome::Installed(_)));
    assert!(!hub.log().is_empty(), "the download went to HF_ENDPOINT");
}
