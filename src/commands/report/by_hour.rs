//! Your use and owl's of an Account's week by hour over the report's period: what owl observed of your day beside what its Runs took.

use anyhow::Result;
use chrono::{DateTime, Utc};
use serde::Serialize;

/// One hour's use of the week: yours and owl's, in points; `None` where not observed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct HourUse {
    #[serde(serialize_with = "crate::clock::ser")]
    pub(crate) hour: DateTime<Utc>,
    pub(crate) yours: Option<f64>,
    pub(crate) owls: Option<f64>,
}

/// Each hour of `account`'s week from `since` to `until` in which anyone's use was
/// observed, in order.
pub(super) fn of(
    store: &crate::store::Store,
    account: &str,
    (since, until): (DateTime<Utc>, DateTime<Utc>),
) -> Result<Vec<HourUse>> {
    let owls_kind = format!("{}weekly", crate::user_use::OWLS);
    let in_period = |hours: Vec<(DateTime<Utc>, f64)>| {
        hours
            .into_iter()
            .filter(move |(h, _)| *h < until)
            .collect::<Vec<_>>()
    };
    let yours = in_period(store.user_use_since(account, "weekly", since)?);
    let owls = in_period(store.user_use_since(account, &owls_kind, since)?);
    let mut hours: Vec<HourUse> = Vec::new();
    for (hour, points, mine) in yours
        .iter()
        .map(|(h, p)| (*h, *p, false))
        .chain(owls.iter().map(|(h, p)| (*h, *p, true)))
    {
        let at = match hours.iter_mut().find(|u| u.hour == hour) {
            Some(u) => u,
            None => {
                hours.push(HourUse {
                    hour,
                    yours: None,
                    owls: None,
                });
                hours.last_mut().expect("just pushed")
            }
        };
        match mine {
            true => at.owls = Some(points),
            false => at.yours = Some(points),
        }
    }
    hours.sort_by_key(|u| u.hour);
    Ok(hours)
}

/// Each hour in words, for the text report: "Mon 10:00: you 5 pp, owl 3 pp".
pub(super) fn said(hours: &[HourUse], tz: &chrono::Local) -> Vec<String> {
    let pct = crate::text::fmt_percent;
    hours
        .iter()
        .map(|u| {
            let parts: Vec<String> = [("you", u.yours), ("owl", u.owls)]
                .into_iter()
                .filter_map(|(who, p)| p.map(|p| format!("{who} {} pp", pct(p))))
                .collect();
            format!(
                "{}: {}",
                u.hour.with_timezone(tz).format("%a %H:%M"),
                parts.join(", ")
            )
        })
        .collect()
}

/// The hours as an HTML table of two bars an hour, yours and owl's, on one scale.
pub(super) fn table(hours: &[HourUse], local: &dyn Fn(&DateTime<Utc>) -> String) -> String {
    if hours.is_empty() {
        return String::new();
    }
    let most = hours
        .iter()
        .flat_map(|u| [u.yours, u.owls])
        .flatten()
        .fold(1.0_f64, f64::max);
    let bar = |points: Option<f64>, class: &str| match points {
        Some(p) => format!(
            "<td><span class=\"bar {class}\" style=\"width:{:.0}px\"></span> {}</td>",
            (p / most * 120.0).max(1.0),
            crate::text::fmt_percent(p)
        ),
        None => "<td>·</td>".into(),
    };
    let rows: String = hours
        .iter()
        .map(|u| {
            format!(
                "<tr><td>{}</td>{}{}</tr>\n",
                local(&u.hour),
                bar(u.yours, "yours"),
                bar(u.owls, "owls")
            )
        })
        .collect();
    format!(
        "<table class=\"by-hour\"><caption>Your use and owl's of the week by hour (pp; · not \
         observed)</caption>\n<tr><th>hour</th><th>yours</th><th>owl's</th></tr>\n{rows}</table>\n"
    )
}
