//! Fuzzes the query strings of `GET /api/v1/events`, `/api/v1/events.csv`
//! and `/api/v1/doors/{id}/latency`: the input is the text after `?`, read
//! as a request carrying it is read, then into each route's typed query.
//! Nothing may panic; a query that reads is read the same way twice.

#![no_main]

use libfuzzer_sys::fuzz_target;
use server::http::doors::LatencyQuery;
use server::http::events::{EventFilters, EventsQuery};
use server::http::extract::{FromQuery, QueryParams};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Some(q) = QueryParams::from_query_string(text) else {
        return;
    };
    let events = EventsQuery::from_query(&q);
    let filters = EventFilters::from_query(&q);
    let latency = LatencyQuery::from_query(&q);
    if let Ok(e) = &events {
        let _ = e.clone().query();
        // A query with paging parameters is a superset of the filters.
        if q.raw("cursor").is_none() && q.raw("direction").is_none() && q.raw("limit").is_none() {
            assert_eq!(filters.as_ref().ok(), Some(&e.filters));
        }
    }
    if let Ok(f) = filters {
        let _ = f.query();
    }
    let _ = latency;
});
