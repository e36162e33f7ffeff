//! The HTTP API against a started service: create, read, replace and
//! delete every entity; token roles (401/403); bad bodies named by field
//! (400/422); missing (404) and conflicting (409) entities; every change an
//! admin event naming the token; a change seen by the very next tap; door
//! modes; tokens listed and deleted; the OpenAPI document served. The CRUD
//! round trip runs on SQLite and PostgreSQL.

use std::sync::Arc;
use std::time::Duration;

use access::{DoorId, DoorMode, ReaderId};
use card::Card;
use host::InProcess;
use pki::trust::TrustConfig;
use pki_issue::{CardCredentials, CardOptions, TestPki, TestPkiOptions};
use serde_json::{json, Value};
use server::config::{init_template, Config};
use server::door::{SimulatedOutput, TapResult};
use server::service::Service;
use store::testing::{postgres_or_skip, TempCluster};
use store::Role;

struct Api {
    rt: tokio::runtime::Runtime,
    service: Option<Service>,
    base: String,
    admin: String,
    operator: String,
    viewer: String,
    output: Arc<SimulatedOutput>,
    config: Config,
    _dir: tempfile::TempDir,
    /// Dropped last: the database outlives the service.
    _cluster: Option<TempCluster>,
}

impl Drop for Api {
    fn drop(&mut self) {
        if let Some(s) = self.service.take() {
            self.rt.block_on(s.shutdown()).unwrap();
        }
    }
}

/// A site from the `init` template (doors 1 `Front door` and 2 `Server
/// room`, schedule 1 `always`, group 1 `staff`, reader 1 at the front door),
/// trusting `pki` when given, on PostgreSQL when `cluster` is given.
fn start(pki: Option<&TestPki>, cluster: Option<TempCluster>) -> Api {
    let dir = tempfile::tempdir().unwrap();
    let text = init_template("pivgate test reader that is not there", "UTC")
        .replace("127.0.0.1:8080", "127.0.0.1:0");
    let path = dir.path().join("pivgate.toml");
    std::fs::write(&path, text).unwrap();
    let mut config = Config::load(&path).unwrap();
    config.database_url = cluster.as_ref().map(|c| c.url().to_string());
    config.trust = pki.map(|pki| {
        let file = |name: &str, der: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, der).unwrap();
            p
        };
        TrustConfig {
            anchors: vec![file("root.der", pki.root_der())],
            intermediates: vec![file("intermediate.der", pki.intermediate_der())],
            crls: vec![
                file("root.crl", pki.root_crl_der()),
                file("intermediate.crl", pki.intermediate_crl_der()),
            ],
            revocation: Default::default(),
            fetch: None,
            ..Default::default()
        }
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let output = Arc::new(SimulatedOutput::new());
    let service = rt
        .block_on(Service::start(config.clone(), Some(output.clone())))
        .unwrap();
    let store = service.loaded().store.clone();
    let token = |name: &str, role| {
        rt.block_on(server::token::create(&store, name, role))
            .unwrap()
    };
    let (admin, operator, viewer) = (
        token("root", Role::Admin),
        token("guard", Role::Operator),
        token("dash", Role::Viewer),
    );
    Api {
        base: service.url(),
        service: Some(service),
        rt,
        admin,
        operator,
        viewer,
        output,
        config,
        _dir: dir,
        _cluster: cluster,
    }
}

impl Api {
    fn service(&self) -> &Service {
        self.service.as_ref().unwrap()
    }

    /// Stops the service and starts it again on the same data, with a new
    /// door output.
    fn restart(&mut self) {
        let s = self.service.take().unwrap();
        self.rt.block_on(s.shutdown()).unwrap();
        self.output = Arc::new(SimulatedOutput::new());
        let s = self
            .rt
            .block_on(Service::start(
                self.config.clone(),
                Some(self.output.clone()),
            ))
            .unwrap();
        self.base = s.url();
        self.service = Some(s);
    }

    /// Status and JSON body (or text, or null when empty) of a request.
    fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
    ) -> (u16, Value) {
        let (st, v, _) = self.call_with(method, path, token, body, &[]);
        (st, v)
    }

    /// [`call`](Self::call) with more headers; also the answer's ETag.
    fn call_with(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> (u16, Value, Option<String>) {
        let mut r =
            ureq::request(method, &format!("{}{path}", self.base)).timeout(Duration::from_secs(20));
        for (k, v) in headers {
            r = r.set(k, v);
        }
        if let Some(t) = token {
            r = r.set("Authorization", &format!("Bearer {t}"));
        }
        let res = match body {
            Some(b) => r.set("Content-Type", "application/json").send_string(b),
            None => r.call(),
        };
        let resp = match res {
            Ok(resp) => resp,
            Err(ureq::Error::Status(_, resp)) => resp,
            Err(e) => panic!("{method} {path}: {e}"),
        };
        let status = resp.status();
        let etag = resp.header("ETag").map(str::to_string);
        let text = resp.into_string().unwrap();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        (status, body, etag)
    }

    fn admin(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let body = body.map(|b| b.to_string());
        self.call(method, path, Some(&self.admin), body.as_deref())
    }

    /// Creates at `path` (201) and returns the entity as stored.
    fn create(&self, path: &str, body: Value) -> Value {
        let (st, v) = self.admin("POST", path, Some(body));
        assert_eq!(st, 201, "POST {path}: {v}");
        assert!(v["id"].as_i64().unwrap() > 0, "{v}");
        v
    }

    /// Reads one, changes it with `edit`, sends it back with PUT (200) and
    /// checks the answer and a fresh read both show the change.
    fn replace(&self, path: &str, edit: impl FnOnce(&mut Value)) -> Value {
        let (st, mut v) = self.admin("GET", path, None);
        assert_eq!(st, 200, "GET {path}: {v}");
        edit(&mut v);
        let (st, answer) = self.admin("PUT", path, Some(v.clone()));
        assert_eq!(st, 200, "PUT {path}: {answer}");
        let (_, again) = self.call("GET", path, Some(&self.viewer), None);
        assert_eq!(answer, again);
        for (k, val) in v.as_object().unwrap() {
            if k != "enrolled_at" && k != "enrolled_by" && k != "version" {
                assert_eq!(&again[k], val, "{path}: field {k}");
            }
        }
        again
    }

    fn delete(&self, path: &str) {
        let (st, v) = self.admin("DELETE", path, None);
        assert_eq!(st, 204, "DELETE {path}: {v}");
        let (st, v) = self.admin("GET", path, None);
        assert_eq!(st, 404, "GET {path} after delete: {v}");
        assert_eq!(v["field"], "id");
    }

    /// Every admin event so far: (action, actor).
    fn admin_events(&self) -> Vec<(String, String, Value)> {
        let (st, page) = self.call(
            "GET",
            "/api/v1/events?kind=admin&limit=1000",
            Some(&self.viewer),
            None,
        );
        assert_eq!(st, 200, "{page}");
        page["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["code"].as_str().unwrap().to_string(),
                    e["actor"].as_str().unwrap().to_string(),
                    e.clone(),
                )
            })
            .collect()
    }
}

fn id(v: &Value) -> i64 {
    v["id"].as_i64().unwrap()
}

/// Creates, reads, replaces and deletes one of each entity; each change is
/// an admin event naming the token and is in the controller's snapshot.
fn crud_round_trips(api: &Api) {
    let snapshot = || api.service().loaded().controller.snapshot();

    let site = api.create(
        "/api/v1/sites",
        json!({"name": "Annex", "time_zone": "America/New_York"}),
    );
    let site_path = format!("/api/v1/sites/{}", id(&site));
    api.replace(&site_path, |v| v["time_zone"] = json!("Europe/Berlin"));
    let s = snapshot();
    assert_eq!(
        s.sites().find(|x| x.id.0 == id(&site)).unwrap().time_zone,
        "Europe/Berlin"
    );

    let door = api.create(
        "/api/v1/doors",
        json!({"site": id(&site), "name": "Annex door", "mechanism": "pki-cak"}),
    );
    assert_eq!(door["mode"], "normal");
    assert_eq!(door["passback"], "none");
    let door_path = format!("/api/v1/doors/{}", id(&door));
    api.replace(&door_path, |v| v["mechanism"] = json!("pki-auth"));
    assert_eq!(
        snapshot().door(DoorId(id(&door))).unwrap().mechanism,
        access::Mechanism::PkiAuth
    );

    let reader = api.create(
        "/api/v1/readers",
        json!({"door": id(&door), "name": "annex", "connection": "sim:annex"}),
    );
    let reader_path = format!("/api/v1/readers/{}", id(&reader));
    api.replace(&reader_path, |v| v["name"] = json!("annex entry"));
    assert_eq!(
        snapshot().reader(ReaderId(id(&reader))).unwrap().door,
        DoorId(id(&door))
    );

    let schedule = api.create(
        "/api/v1/schedules",
        json!({"name": "nights", "windows": ["mon-fri 22:00-06:00"]}),
    );
    let schedule_path = format!("/api/v1/schedules/{}", id(&schedule));
    api.replace(&schedule_path, |v| {
        v["holiday_windows"] = json!(["10:00-14:00"])
    });

    let holder = api.create(
        "/api/v1/cardholders",
        json!({"name": "Carol", "status": "active", "valid_until": "2030-01-01T00:00:00Z"}),
    );
    let holder_path = format!("/api/v1/cardholders/{}", id(&holder));
    let h = api.replace(&holder_path, |v| {
        v["status"] = json!("suspended");
        v["reason"] = json!("on leave");
    });
    assert_eq!(h["reason"], "on leave");

    let credential = api.create(
        "/api/v1/credentials",
        json!({
            "cardholder": id(&holder),
            "card_uuid": "urn:uuid:3bb0a6c4-6d2e-4c8f-9a41-2b9e7d01c5aa",
            "state": "active",
        }),
    );
    assert_eq!(credential["enrolled_by"], "root");
    let credential_path = format!("/api/v1/credentials/{}", id(&credential));
    let c = api.replace(&credential_path, |v| {
        v["state"] = json!("revoked");
        v["reason"] = json!("card lost");
    });
    assert_eq!(c["enrolled_at"], credential["enrolled_at"]);

    let group = api.create(
        "/api/v1/groups",
        json!({
            "name": "night shift",
            "schedule": id(&schedule),
            "doors": [id(&door)],
            "cardholders": [id(&holder)],
        }),
    );
    let group_path = format!("/api/v1/groups/{}", id(&group));
    api.replace(&group_path, |v| v["doors"] = json!([1, id(&door)]));

    let holiday = api.create(
        "/api/v1/holidays",
        json!({"site": id(&site), "date": "2026-12-25", "name": "Christmas"}),
    );
    let holiday_path = format!("/api/v1/holidays/{}", id(&holiday));
    api.replace(&holiday_path, |v| v["date"] = json!("2026-12-26"));

    // Lists hold them.
    for (list, entity) in [
        ("sites", &site),
        ("doors", &door),
        ("readers", &reader),
        ("schedules", &schedule),
        ("cardholders", &holder),
        ("credentials", &credential),
        ("groups", &group),
        ("holidays", &holiday),
    ] {
        let (st, v) = api.call("GET", &format!("/api/v1/{list}"), Some(&api.viewer), None);
        assert_eq!(st, 200, "{v}");
        assert!(
            v["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x["id"] == entity["id"]),
            "{list}: {v}"
        );
    }

    // A site still used by a door cannot go.
    let (st, v) = api.admin("DELETE", &site_path, None);
    assert_eq!(st, 409, "{v}");

    for path in [
        &holiday_path,
        &group_path,
        &credential_path,
        &holder_path,
        &schedule_path,
        &reader_path,
        &door_path,
        &site_path,
    ] {
        api.delete(path);
    }
    assert!(snapshot().door(DoorId(id(&door))).is_none());
    assert!(snapshot().reader(ReaderId(id(&reader))).is_none());

    // Every change is an admin event naming the token, in order.
    let events = api.admin_events();
    let actions: Vec<&str> = events.iter().map(|(a, _, _)| a.as_str()).collect();
    let mut expected = Vec::new();
    for kind in [
        "site",
        "door",
        "reader",
        "schedule",
        "cardholder",
        "credential",
        "group",
        "holiday",
    ] {
        expected.push(format!("{kind}.create"));
        expected.push(format!("{kind}.update"));
    }
    for kind in [
        "holiday",
        "group",
        "credential",
        "cardholder",
        "schedule",
        "reader",
        "door",
        "site",
    ] {
        expected.push(format!("{kind}.delete"));
    }
    assert_eq!(actions, expected);
    assert!(events.iter().all(|(_, actor, _)| actor == "root"));
    let (_, _, door_update) = &events[3];
    assert_eq!(door_update["door"], door["id"]);
    assert_eq!(door_update["data"]["before"]["mechanism"], "pki-cak");
    assert_eq!(door_update["data"]["after"]["mechanism"], "pki-auth");
    assert!(
        door_update["reason"].as_str().unwrap().contains("by root"),
        "{door_update}"
    );
}

#[test]
fn crud_round_trips_on_sqlite() {
    crud_round_trips(&start(None, None));
}

#[test]
fn crud_round_trips_on_postgresql() {
    let Some(cluster) = postgres_or_skip("crud_round_trips_on_postgresql") else {
        return;
    };
    let api = start(None, Some(cluster));
    assert_eq!(
        api.service().loaded().store.backend(),
        store::Backend::Postgres
    );
    crud_round_trips(&api);
}

#[test]
fn roles_and_bad_input_are_answered_with_the_field_named() {
    let api = start(None, None);
    let site = r#"{"name": "Annex", "time_zone": "UTC"}"#;

    // No token: 401; a viewer or operator changing entities: 403.
    for (method, path, body) in [
        ("GET", "/api/v1/sites", None),
        ("GET", "/api/v1/sites/1", None),
        ("POST", "/api/v1/sites", Some(site)),
        ("PUT", "/api/v1/sites/1", Some(site)),
        ("DELETE", "/api/v1/sites/1", None),
        ("PUT", "/api/v1/doors/1/mode", Some(r#"{"mode": "locked"}"#)),
        ("GET", "/api/v1/tokens", None),
        ("DELETE", "/api/v1/tokens/dash", None),
    ] {
        let (st, v) = api.call(method, path, None, body);
        assert_eq!(st, 401, "{method} {path}: {v}");
    }
    for (method, path, body, token) in [
        ("POST", "/api/v1/sites", Some(site), &api.viewer),
        ("POST", "/api/v1/sites", Some(site), &api.operator),
        ("PUT", "/api/v1/sites/1", Some(site), &api.operator),
        ("DELETE", "/api/v1/doors/1", None, &api.operator),
        ("POST", "/api/v1/credentials", Some("{}"), &api.viewer),
        (
            "PUT",
            "/api/v1/doors/1/mode",
            Some(r#"{"mode": "locked"}"#),
            &api.viewer,
        ),
        ("GET", "/api/v1/tokens", None, &api.operator),
        ("DELETE", "/api/v1/tokens/dash", None, &api.viewer),
    ] {
        let (st, v) = api.call(method, path, Some(token), body);
        assert_eq!(st, 403, "{method} {path}: {v}");
    }
    // Viewers read.
    let (st, v) = api.call("GET", "/api/v1/sites/1", Some(&api.viewer), None);
    assert_eq!((st, v["time_zone"].as_str()), (200, Some("UTC")), "{v}");

    // Bodies: not JSON or none 400; a wrong value or an unknown field 422
    // naming the field.
    let bad = |method: &str, path: &str, body: &str, status: u16, field: Option<&str>| {
        let (st, v) = api.call(method, path, Some(&api.admin), Some(body));
        assert_eq!(st, status, "{method} {path} {body}: {v}");
        assert_eq!(v["field"].as_str(), field, "{method} {path} {body}: {v}");
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
    };
    bad("POST", "/api/v1/sites", "{not json", 400, None);
    bad("POST", "/api/v1/sites", "", 400, None);
    bad(
        "POST",
        "/api/v1/sites",
        r#"{"name": 5, "time_zone": "UTC"}"#,
        422,
        Some("name"),
    );
    bad(
        "POST",
        "/api/v1/sites",
        r#"{"name": "x", "time_zone": "UTC", "colour": "red"}"#,
        422,
        Some("colour"),
    );
    bad(
        "POST",
        "/api/v1/sites",
        r#"{"name": "x"}"#,
        422,
        Some("time_zone"),
    );
    bad(
        "POST",
        "/api/v1/sites",
        r#"{"name": "x", "time_zone": "Mars/Olympus"}"#,
        422,
        Some("time_zone"),
    );
    bad(
        "POST",
        "/api/v1/sites",
        r#"{"name": " ", "time_zone": "UTC"}"#,
        422,
        Some("name"),
    );
    bad(
        "POST",
        "/api/v1/doors",
        r#"{"site": 99, "name": "x", "mechanism": "pki-cak"}"#,
        422,
        Some("site"),
    );
    bad(
        "POST",
        "/api/v1/doors",
        r#"{"site": 1, "name": "x", "mechanism": "pin"}"#,
        422,
        Some("mechanism"),
    );
    bad(
        "POST",
        "/api/v1/doors",
        r#"{"site": 1, "name": "x", "mechanism": "chuid"}"#,
        422,
        Some("allow_low_assurance"),
    );
    bad(
        "POST",
        "/api/v1/readers",
        r#"{"door": 42, "name": "x", "connection": "y"}"#,
        422,
        Some("door"),
    );
    bad(
        "POST",
        "/api/v1/schedules",
        r#"{"name": "x", "windows": ["someday 07:00-19:00"]}"#,
        422,
        Some("windows[0]"),
    );
    bad(
        "POST",
        "/api/v1/cardholders",
        r#"{"name": "x", "status": "suspended"}"#,
        422,
        Some("reason"),
    );
    bad(
        "POST",
        "/api/v1/cardholders",
        r#"{"name": "x", "status": "away"}"#,
        422,
        Some("status"),
    );
    bad(
        "POST",
        "/api/v1/cardholders",
        r#"{"name": "x", "status": "active", "valid_from": "2030-01-01T00:00:00Z", "valid_until": "2020-01-01T00:00:00Z"}"#,
        422,
        Some("valid_until"),
    );
    bad(
        "POST",
        "/api/v1/credentials",
        r#"{"cardholder": 1, "state": "active"}"#,
        422,
        Some("cert_sha256"),
    );
    bad(
        "POST",
        "/api/v1/credentials",
        r#"{"cardholder": 1, "fasc_n": "abcd", "state": "active"}"#,
        422,
        Some("fasc_n"),
    );
    bad(
        "POST",
        "/api/v1/groups",
        r#"{"name": "x", "schedule": 1, "doors": [1, 77]}"#,
        422,
        Some("doors"),
    );
    bad(
        "POST",
        "/api/v1/holidays",
        r#"{"date": "2026-02-30", "name": "x"}"#,
        422,
        Some("date"),
    );
    bad(
        "PUT",
        "/api/v1/sites/1",
        r#"{"id": 2, "name": "x", "time_zone": "UTC"}"#,
        422,
        Some("id"),
    );
    bad(
        "PUT",
        "/api/v1/doors/1/mode",
        r#"{"mode": "sideways"}"#,
        422,
        Some("mode"),
    );
    bad(
        "PUT",
        "/api/v1/doors/1/mode",
        r#"{"mode": "locked", "why": "x"}"#,
        422,
        Some("why"),
    );
    bad("PUT", "/api/v1/sites/abc", site, 400, Some("id"));

    // Missing: 404 naming the id.
    for (method, path, body) in [
        ("GET", "/api/v1/sites/999", None),
        ("PUT", "/api/v1/sites/999", Some(site)),
        ("DELETE", "/api/v1/cardholders/999", None),
        (
            "PUT",
            "/api/v1/doors/999/mode",
            Some(r#"{"mode": "locked"}"#),
        ),
    ] {
        let (st, v) = api.call(method, path, Some(&api.admin), body);
        assert_eq!(
            (st, v["field"].as_str()),
            (404, Some("id")),
            "{method} {path}: {v}"
        );
    }
    let (st, v) = api.admin("DELETE", "/api/v1/tokens/nobody", None);
    assert_eq!((st, v["field"].as_str()), (404, Some("name")), "{v}");

    // Conflicts: a taken unique value, an identifier another credential
    // has, an entity still in use.
    let (st, v) = api.admin(
        "POST",
        "/api/v1/schedules",
        Some(json!({"name": "always", "windows": []})),
    );
    assert_eq!(st, 409, "{v}");
    let holder = api.create(
        "/api/v1/cardholders",
        json!({"name": "Dan", "status": "active"}),
    );
    let uuid = "urn:uuid:11111111-2222-3333-4444-555555555555";
    api.create(
        "/api/v1/credentials",
        json!({"cardholder": id(&holder), "card_uuid": uuid, "state": "active"}),
    );
    let (st, v) = api.admin(
        "POST",
        "/api/v1/credentials",
        Some(json!({"cardholder": id(&holder), "card_uuid": uuid, "state": "active"})),
    );
    assert_eq!((st, v["field"].as_str()), (409, Some("card_uuid")), "{v}");
    let (st, v) = api.admin("DELETE", "/api/v1/schedules/1", None);
    assert_eq!(st, 409, "the group `staff` uses it: {v}");
    let (st, v) = api.admin("DELETE", "/api/v1/doors/1", None);
    assert_eq!(st, 409, "a reader and groups use it: {v}");

    // Only the two creations above changed anything, and both are logged;
    // refused changes left no event and no trace.
    let actions: Vec<String> = api.admin_events().into_iter().map(|(a, _, _)| a).collect();
    assert_eq!(actions, ["cardholder.create", "credential.create"]);
    let (_, sites) = api.call("GET", "/api/v1/sites", Some(&api.viewer), None);
    assert_eq!(sites["items"].as_array().unwrap().len(), 1, "{sites}");

    // Tokens: listed without secrets, deleted (stops working at once).
    let (st, v) = api.admin("GET", "/api/v1/tokens", None);
    assert_eq!(st, 200, "{v}");
    let names: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 3, "{v}");
    for n in ["root", "guard", "dash"] {
        assert!(names.contains(&n), "{v}");
    }
    assert!(!v.to_string().contains("hash"), "{v}");
    assert!(!v.to_string().contains(&api.viewer), "{v}");
    let dash = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "dash")
        .unwrap();
    assert_eq!(dash["role"], "viewer");
    let (st, v) = api.admin("DELETE", "/api/v1/tokens/dash", None);
    assert_eq!(st, 204, "{v}");
    let (st, _) = api.call("GET", "/api/v1/sites", Some(&api.viewer), None);
    assert_eq!(st, 401);
    let (st, page) = api.call(
        "GET",
        "/api/v1/events?kind=admin",
        Some(&api.operator),
        None,
    );
    assert_eq!(st, 200);
    let last = page["events"].as_array().unwrap().last().unwrap();
    assert_eq!(
        (last["code"].as_str(), last["actor"].as_str()),
        (Some("token.delete"), Some("root")),
        "{last}"
    );

    // The document needs no token and describes what was used here.
    let (st, doc) = api.call("GET", "/api/v1/openapi.json", None, None);
    assert_eq!(st, 200);
    assert!(doc["paths"]["/api/v1/credentials/{id}"]["put"].is_object());
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
}

/// Every field an answer carries is in the entity's schema, and an answer
/// sent back as a body is accepted (checked by the round trips above).
#[test]
fn answers_match_the_documented_schemas() {
    let api = start(None, None);
    api.create(
        "/api/v1/holidays",
        json!({"date": "2026-12-25", "name": "Christmas"}),
    );
    let h = api.create(
        "/api/v1/cardholders",
        json!({"name": "Eve", "status": "suspended", "reason": "x"}),
    );
    api.create(
        "/api/v1/credentials",
        json!({
            "cardholder": id(&h),
            "fasc_n": "d4e739da739ced39ce739d836858210842108421c84210c3eb",
            "cert_sha256": "ab".repeat(32),
            "spki_sha256": "cd".repeat(32),
            "expires_at": "2031-01-01T00:00:00Z",
            "state": "revoked",
            "reason": "key compromise",
            "at": "2026-01-01T00:00:00Z",
        }),
    );
    let (_, doc) = api.call("GET", "/api/v1/openapi.json", None, None);
    for (list, schema) in [
        ("sites", "Site"),
        ("doors", "Door"),
        ("readers", "Reader"),
        ("cardholders", "Cardholder"),
        ("credentials", "Credential"),
        ("groups", "Group"),
        ("schedules", "Schedule"),
        ("holidays", "Holiday"),
        ("tokens", "Token"),
    ] {
        let props = doc["components"]["schemas"][schema]["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("no schema {schema}"));
        let (st, v) = api.admin("GET", &format!("/api/v1/{list}"), None);
        assert_eq!(st, 200);
        let items = v["items"].as_array().unwrap();
        assert!(!items.is_empty(), "{list}");
        for item in items {
            for key in item.as_object().unwrap().keys() {
                assert!(
                    props.contains_key(key),
                    "{list}: `{key}` is not in schema {schema}"
                );
            }
        }
    }
}

fn sha256(der: &[u8]) -> String {
    hex::encode(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, der).as_ref())
}

fn tap(api: &Api, c: &CardCredentials) -> TapResult {
    let mut t = InProcess::new(Card::new(c.card_image(Some(7)).unwrap()));
    api.service()
        .loaded()
        .controller
        .tap(&mut t, ReaderId(1), None, None)
        .unwrap()
}

#[test]
fn a_change_through_the_api_is_seen_by_the_next_tap() {
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let alice = pki
        .issue_card(&CardOptions {
            cardholder: "Alice".into(),
            ..CardOptions::default()
        })
        .unwrap();
    let api = start(Some(&pki), None);

    // Not enrolled yet.
    assert_eq!(tap(&api, &alice).code(), "not-enrolled");

    // Enrolled through the API and added to `staff` (front door, always).
    let holder = api.create(
        "/api/v1/cardholders",
        json!({"name": "Alice", "status": "active"}),
    );
    api.create(
        "/api/v1/credentials",
        json!({
            "cardholder": id(&holder),
            "cert_sha256": sha256(&alice.slot(0x9E).unwrap().certificate),
            "state": "active",
        }),
    );
    assert_eq!(tap(&api, &alice).code(), "no-group-for-door");
    api.replace("/api/v1/groups/1", |g| {
        g["cardholders"] = json!([id(&holder)])
    });
    let r = tap(&api, &alice);
    assert!(r.granted() && r.opened, "{:?}", r.reason());

    // Suspended: refused at once; reinstated: granted again.
    let holder_path = format!("/api/v1/cardholders/{}", id(&holder));
    api.replace(&holder_path, |v| {
        v["status"] = json!("suspended");
        v["reason"] = json!("badge audit");
    });
    let r = tap(&api, &alice);
    assert_eq!(r.code(), "cardholder-suspended");
    assert!(
        r.reason().unwrap().contains("badge audit"),
        "{:?}",
        r.reason()
    );
    assert!(!r.opened);
    api.replace(&holder_path, |v| {
        v["status"] = json!("active");
        v.as_object_mut().unwrap().remove("reason");
    });
    assert!(tap(&api, &alice).granted());

    // Door modes (operator): locked refuses everyone, unlocked holds the
    // lock released; each is stored on the door and logged naming the token.
    let mode = |m: &str| {
        let (st, v) = api.call(
            "PUT",
            "/api/v1/doors/1/mode",
            Some(&api.operator),
            Some(&json!({"mode": m, "reason": "drill"}).to_string()),
        );
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["mode"], m);
        v
    };
    mode("locked");
    let r = tap(&api, &alice);
    assert_eq!(r.code(), "door-locked");
    assert!(!r.opened);
    let (_, door) = api.call("GET", "/api/v1/doors/1", Some(&api.viewer), None);
    assert_eq!(door["mode"], "locked");

    let releases = api.output.releases().len();
    let answer = mode("unlocked");
    assert_eq!(api.output.mode(DoorId(1)), DoorMode::Unlocked);
    let r = tap(&api, &alice);
    assert!(r.granted() && r.opened, "{:?}", r.reason());
    assert_eq!(
        api.output.releases().len(),
        releases,
        "a held-open door is not pulsed (a pulse would relock it)"
    );
    mode("normal");
    assert_eq!(api.output.mode(DoorId(1)), DoorMode::Normal);
    assert!(tap(&api, &alice).opened);
    assert_eq!(api.output.releases().len(), releases + 1);

    let (st, page) = api.call(
        "GET",
        "/api/v1/events?kind=door-command",
        Some(&api.viewer),
        None,
    );
    assert_eq!(st, 200);
    let commands = page["events"].as_array().unwrap();
    assert_eq!(commands.len(), 3, "{page}");
    assert_eq!(commands[1]["id"], answer["event"]);
    for c in commands {
        assert_eq!(
            (c["code"].as_str(), c["actor"].as_str()),
            (Some("mode"), Some("guard")),
            "{c}"
        );
        assert!(
            c["reason"].as_str().unwrap().ends_with("by guard: drill"),
            "{c}"
        );
    }
    assert_eq!(commands[1]["data"]["mode"], "unlocked");
    assert_eq!(commands[1]["data"]["previous"], "locked");

    // Every change above is an admin event naming the admin token.
    let events = api.admin_events();
    assert_eq!(events.len(), 5, "{events:?}");
    assert!(events.iter().all(|(_, actor, _)| actor == "root"));

    // A cardholder with a credential cannot go; without it, they leave
    // their groups with them.
    let (st, v) = api.admin("DELETE", &holder_path, None);
    assert_eq!(st, 409, "{v}");
    let (_, creds) = api.admin("GET", "/api/v1/credentials", None);
    api.delete(&format!("/api/v1/credentials/{}", creds["items"][0]["id"]));
    api.delete(&holder_path);
    let (_, staff) = api.admin("GET", "/api/v1/groups/1", None);
    assert_eq!(staff["cardholders"], json!([]), "{staff}");
    assert_eq!(tap(&api, &alice).code(), "not-enrolled");
    let events = api.admin_events();
    assert_eq!(events.len(), 7, "{events:?}");
    assert!(events.iter().all(|(_, actor, _)| actor == "root"));
}

#[test]
fn a_stored_door_mode_is_applied_at_start() {
    let mut api = start(None, None);
    let (st, v) = api.call(
        "PUT",
        "/api/v1/doors/2/mode",
        Some(&api.operator),
        Some(r#"{"mode": "unlocked"}"#),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(api.output.mode(DoorId(2)), DoorMode::Unlocked);
    api.restart();
    assert_eq!(api.output.mode_changes(), [(DoorId(2), DoorMode::Unlocked)]);
    // Locking it again through a replacement of the whole door (admin)
    // drives the output too.
    api.replace("/api/v1/doors/2", |d| d["mode"] = json!("locked"));
    assert_eq!(api.output.mode(DoorId(2)), DoorMode::Locked);
}

/// Two admins at once: every entity has a version, answered as an ETag; a
/// change made against an older one is refused (412) instead of undoing the
/// newer one; PATCH changes only the fields it names.
#[test]
fn a_stale_change_is_refused_instead_of_undoing_a_newer_one() {
    let api = start(None, None);
    let ada = api.create(
        "/api/v1/cardholders",
        json!({"name": "Ada", "status": "active"}),
    );
    let bob = api.create(
        "/api/v1/cardholders",
        json!({"name": "Bob", "status": "active"}),
    );
    let admin = api.admin.clone();
    let send = |method: &str, path: &str, body: Option<&Value>, if_match: Option<&str>| {
        let body = body.map(|b| b.to_string());
        let headers: Vec<(&str, &str)> = if_match.map(|m| ("If-Match", m)).into_iter().collect();
        api.call_with(method, path, Some(&admin), body.as_deref(), &headers)
    };

    // Both admins open the group; it lists Ada and Bob.
    let (st, _, _) = send(
        "PATCH",
        "/api/v1/groups/1",
        Some(&json!({"cardholders": [id(&ada), id(&bob)]})),
        None,
    );
    assert_eq!(st, 200);
    let (st, form, etag) = send("GET", "/api/v1/groups/1", None, None);
    assert_eq!(st, 200);
    let etag = etag.expect("an ETag");
    assert_eq!(etag, format!("\"{}\"", form["version"]), "{form}");

    // The first removes Bob.
    let (st, after, newer) = send(
        "PATCH",
        "/api/v1/groups/1",
        Some(&json!({"cardholders": [id(&ada)]})),
        Some(&etag),
    );
    assert_eq!(st, 200, "{after}");
    assert_ne!(newer.as_deref(), Some(etag.as_str()), "the version went up");

    // The second saves the form they still show, with Bob in it: refused.
    let (st, err, _) = send("PUT", "/api/v1/groups/1", Some(&form), Some(&etag));
    assert_eq!(st, 412, "{err}");
    assert!(
        err["error"]
            .as_str()
            .unwrap()
            .contains("changed by someone else"),
        "{err}"
    );
    // A PUT without If-Match of what was read is as safe once re-read.
    let (_, now, _) = send("GET", "/api/v1/groups/1", None, None);
    assert_eq!(now["cardholders"], json!([id(&ada)]), "Bob stays out");
    // So is a stale delete.
    let (st, _, _) = send("DELETE", "/api/v1/groups/1", None, Some(&etag));
    assert_eq!(st, 412);

    // A suspension (as re-validation makes it) is not undone by a form
    // read before it.
    let path = format!("/api/v1/cardholders/{}", id(&ada));
    let (_, before, old) = send("GET", &path, None, None);
    let (st, _, _) = send(
        "PATCH",
        &path,
        Some(&json!({"status": "suspended", "reason": "certificate revoked"})),
        None,
    );
    assert_eq!(st, 200);
    let mut stale = before.clone();
    stale["name"] = json!("Ada Lovelace");
    let (st, _, _) = send("PUT", &path, Some(&stale), old.as_deref());
    assert_eq!(st, 412);
    let (_, ada_now, _) = send("GET", &path, None, None);
    assert_eq!(ada_now["status"], "suspended");
    assert_eq!(
        ada_now["name"], "Ada",
        "PATCH kept the fields it did not name"
    );

    // If-Match that is not an ETag is a bad request; `*` matches any.
    let (st, err, _) = send("PATCH", &path, Some(&json!({"name": "A"})), Some("3"));
    assert_eq!(
        (st, err["field"].as_str()),
        (400, Some("If-Match")),
        "{err}"
    );
    let (st, _, _) = send("PATCH", &path, Some(&json!({"name": "Ada L."})), Some("*"));
    assert_eq!(st, 200);
    // The id cannot be patched; null removes an optional field.
    let (st, _, _) = send("PATCH", &path, Some(&json!({"id": 999})), None);
    assert_eq!(st, 422);
    let (st, v, _) = send(
        "PATCH",
        &path,
        Some(&json!({"status": "active", "reason": null, "valid_until": null})),
        None,
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["status"], "active");
}

/// Review findings: the bearer scheme in any case, a cardholder created
/// without a status is active, a schedule window in another script is a
/// 422 (not a panic), a name with a NUL or another control character is
/// refused.
#[test]
fn small_review_findings() {
    let api = start(None, None);
    let (st, _, _) = api.call_with(
        "GET",
        "/api/v1/doors",
        None,
        None,
        &[("Authorization", &format!("BEARER {}", api.viewer))],
    );
    assert_eq!(st, 200, "the scheme is case-insensitive");

    let c = api.create("/api/v1/cardholders", json!({"name": "Dee"}));
    assert_eq!(c["status"], "active");

    for window in [
        "ñññ 08:00-10:00",
        "mé 09:00-10:00",
        "月 08:00-09:00",
        "mon 08:00-1０:00",
    ] {
        let (st, v) = api.admin(
            "POST",
            "/api/v1/schedules",
            Some(json!({"name": "odd", "windows": [window], "holiday_windows": []})),
        );
        assert_eq!(st, 422, "{window}: {v}");
    }
    for name in ["a\u{0}b", "bell\u{7}", "two\nlines"] {
        let (st, v) = api.admin("POST", "/api/v1/cardholders", Some(json!({"name": name})));
        assert_eq!(
            (st, v["field"].as_str()),
            (422, Some("name")),
            "{name:?}: {v}"
        );
    }
    let (st, _) = api.call("GET", "/healthz", None, None);
    assert_eq!(st, 200, "still answering");
}

/// A door's unlock schedule and first-card flag round-trip with their
/// version; a site's lockdown is an admin command (403 for an operator)
/// that locks every door of the site in one recorded change, and is lifted
/// the same way.
#[test]
fn door_schedules_and_site_lockdown_through_the_api() {
    let api = start(None, None);
    // Unlocked by the `always` schedule at once.
    let door = api.replace("/api/v1/doors/2", |d| d["unlock_schedule"] = json!(1));
    assert_eq!(door["unlock_schedule"], 1);
    assert_eq!(door["first_card_unlock"], false);
    assert_eq!(api.output.mode(DoorId(2)), DoorMode::Unlocked);
    // The door's status says why and until when it is driven unlocked.
    let status_of = |id: i64| {
        let (st, status) = api.call("GET", "/api/v1/doors/status", Some(&api.viewer), None);
        assert_eq!(st, 200, "{status}");
        status["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["door"] == id)
            .unwrap()
            .clone()
    };
    let d = status_of(2);
    assert_eq!(
        (&d["mode"], &d["driven_mode"], &d["driven_by"]),
        (&json!("normal"), &json!("unlocked"), &json!("schedule")),
        "{d}"
    );
    let until: access::jiff::Timestamp = d["driven_until"].as_str().unwrap().parse().unwrap();
    assert!(until > access::jiff::Timestamp::now(), "{d}");
    let d = status_of(1);
    assert_eq!(
        (&d["driven_by"], &d["driven_until"]),
        (&json!(null), &json!(null)),
        "{d}"
    );
    // First-card unlock: normal until a tap is granted there.
    let door = api.replace("/api/v1/doors/2", |d| d["first_card_unlock"] = json!(true));
    assert_eq!(door["first_card_unlock"], true);
    assert_eq!(api.output.mode(DoorId(2)), DoorMode::Normal);
    assert_eq!(status_of(2)["driven_by"], json!(null));
    // A schedule that does not exist is refused, naming the field.
    let (st, mut d) = api.admin("GET", "/api/v1/doors/2", None);
    assert_eq!(st, 200);
    d["unlock_schedule"] = json!(99);
    let (st, v) = api.admin("PUT", "/api/v1/doors/2", Some(d));
    assert_eq!(st, 422, "{v}");
    assert_eq!(v["field"], "unlock_schedule", "{v}");

    let (st, v) = api.call(
        "POST",
        "/api/v1/sites/1/lockdown",
        Some(&api.operator),
        None,
    );
    assert_eq!(st, 403, "{v}");
    let (st, v) = api.admin(
        "POST",
        "/api/v1/sites/1/lockdown",
        Some(json!({"reason": "drill"})),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["lockdown"], true);
    assert!(v["event"].as_i64().unwrap() > 0, "{v}");
    for door in [DoorId(1), DoorId(2)] {
        assert_eq!(api.output.mode(door), DoorMode::Locked);
    }
    let (_, site) = api.call("GET", "/api/v1/sites/1", Some(&api.viewer), None);
    assert_eq!(site["lockdown"], true);
    let (st, status) = api.call("GET", "/api/v1/doors/status", Some(&api.viewer), None);
    assert_eq!(st, 200, "{status}");
    for d in status["items"].as_array().unwrap() {
        assert_eq!(d["mode"], "normal", "{d}");
        assert_eq!(d["driven_mode"], "locked", "{d}");
        assert_eq!(d["driven_by"], "lockdown", "{d}");
        assert_eq!(d["driven_until"], json!(null), "{d}");
    }
    let events = api.admin_events();
    let (_, actor, e) = events
        .iter()
        .find(|(code, _, _)| code == "site.lockdown")
        .expect("the lockdown event");
    assert_eq!(actor, "root");
    assert!(e["reason"].as_str().unwrap().ends_with(": drill"), "{e}");
    // An override unlock still opens a door.
    let (st, v) = api.call(
        "POST",
        "/api/v1/doors/1/unlock",
        Some(&api.operator),
        Some(r#"{"override": true}"#),
    );
    assert_eq!(st, 200, "{v}");

    let (st, v) = api.admin("DELETE", "/api/v1/sites/1/lockdown", None);
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["lockdown"], false);
    assert_eq!(api.output.mode(DoorId(1)), DoorMode::Normal);
    assert_eq!(api.output.mode(DoorId(2)), DoorMode::Normal);
    assert!(api
        .admin_events()
        .iter()
        .any(|(code, _, _)| code == "site.lockdown-lifted"));
    let (st, v) = api.admin("POST", "/api/v1/sites/99/lockdown", None);
    assert_eq!(st, 404, "{v}");

    let (st, doc) = api.call("GET", "/api/v1/openapi.json", None, None);
    assert_eq!(st, 200);
    let lockdown = &doc["paths"]["/api/v1/sites/{id}/lockdown"];
    assert!(lockdown["post"].is_object() && lockdown["delete"].is_object());
}
