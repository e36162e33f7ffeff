//! The role each route of `server::http::routes()` names is the one its
//! handler enforces: for every route and every token role, a token whose
//! role does not include the route's is 403, any other is let through (the
//! answer is then the handler's own: 404 for the missing ids used here,
//! 400 or 422 for the empty bodies, 200 for reads), and no token is 401.

mod common;

use common::site;
use store::Role;

fn status(method: &str, url: &str, token: Option<&str>) -> u16 {
    let mut req = ureq::request(method, url);
    if let Some(t) = token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    match req.call() {
        Ok(r) => r.status(),
        Err(ureq::Error::Status(s, _)) => s,
        Err(e) => panic!("{method} {url}: {e}"),
    }
}

#[test]
fn every_route_enforces_the_role_the_route_table_names() {
    let s = site();
    let store = &s.service().loaded().store;
    let tokens: Vec<(Role, String)> = [Role::Viewer, Role::Operator, Role::Admin, Role::Keypad]
        .into_iter()
        .map(|role| {
            let name = format!("as-{role}");
            let t =
                s.rt.block_on(server::token::create(store, &name, role))
                    .unwrap();
            (role, t)
        })
        .collect();
    let mut checked = 0;
    for r in server::http::routes() {
        // Ids nothing has: no route changes anything here.
        let path = r
            .path
            .replace("{id}", "987654")
            .replace("{name}", "nobody")
            .replace("{file}", "nothing.js");
        let url = s.url(&path);
        let method = r.verb.as_str().to_uppercase();
        let Some(needed) = r.role else {
            assert_ne!(status(&method, &url, None), 401, "{method} {path}");
            continue;
        };
        assert_eq!(status(&method, &url, None), 401, "{method} {path}");
        for (role, token) in &tokens {
            let got = status(&method, &url, Some(token));
            if role.includes(needed) {
                assert!(
                    got != 401 && got != 403,
                    "{method} {path} with a {role} token: {got}"
                );
            } else {
                assert_eq!(got, 403, "{method} {path} with a {role} token");
            }
            checked += 1;
        }
    }
    assert!(checked > 100, "{checked}");
}
