// session::metrics() as Prometheus text (exposition format 0.0.4).
#include <zklock/metrics.hpp>

#include <charconv>
#include <cstdio>

namespace zklock {

const char* to_string(loss_reason r) noexcept {
    switch (r) {
    case loss_reason::lease_expired:
        return "lease_expired";
    case loss_reason::disconnected:
        return "disconnected";
    case loss_reason::session_expired:
        return "session_expired";
    case loss_reason::node_deleted:
        return "node_deleted";
    case loss_reason::session_closed:
        return "session_closed";
    case loss_reason::other:
        return "other";
    }
    return "other";
}

namespace {

/// A label value: backslash, double quote and newline escaped.
std::string label(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

/// The shortest text that reads back as exactly `v` ("0.005", not "0.0050000000000000001"), so
/// that a dashboard's exact label match (le="0.005") finds the bucket.
std::string number(double v) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
}

class writer {
public:
    explicit writer(const std::string& prefix) : prefix_(prefix) {}

    void family(const std::string& name, const char* type, const char* help) {
        out_ += "# HELP " + prefix_ + "_" + name + " " + help + "\n# TYPE " + prefix_ + "_" + name + " " +
                type + "\n";
    }
    void sample(const std::string& name, const std::string& labels, const std::string& value) {
        out_ += prefix_ + "_" + name + (labels.empty() ? "" : "{" + labels + "}") + " " + value + "\n";
    }
    void sample(const std::string& name, const std::string& labels, std::uint64_t v) {
        sample(name, labels, std::to_string(v));
    }
    void histogram(const std::string& name, const std::string& labels, const duration_histogram& h) {
        std::uint64_t cumulative = 0;
        auto sep = labels.empty() ? "" : ",";
        for (std::size_t i = 0; i < duration_histogram::bounds.size(); ++i) {
            cumulative += h.buckets[i];
            sample(name + "_bucket", labels + sep + "le=\"" + number(duration_histogram::bounds[i]) + "\"",
                   cumulative);
        }
        cumulative += h.buckets.back();
        sample(name + "_bucket", labels + sep + "le=\"+Inf\"", cumulative);
        sample(name + "_sum", labels, number(static_cast<double>(h.sum_us) / 1e6));
        sample(name + "_count", labels, h.count);
    }
    std::string take() { return std::move(out_); }

private:
    std::string prefix_;
    std::string out_;
};

} // namespace

std::string to_prometheus(const metrics_snapshot& m, const std::string& prefix) {
    writer w(prefix);
    auto path_label = [](const std::string& p) { return "path=\"" + label(p) + "\""; };

    w.family("acquires_total", "counter", "Lock acquires that completed, by outcome.");
    for (auto& [p, l] : m.by_path) {
        auto pl = path_label(p);
        w.sample("acquires_total", pl + ",outcome=\"granted\"", l.granted);
        w.sample("acquires_total", pl + ",outcome=\"timed_out\"", l.timed_out);
        w.sample("acquires_total", pl + ",outcome=\"busy\"", l.busy);
        w.sample("acquires_total", pl + ",outcome=\"cancelled\"", l.cancelled);
        w.sample("acquires_total", pl + ",outcome=\"failed\"", l.failed);
    }
    w.family("acquires_started_total", "counter", "Lock acquires started.");
    for (auto& [p, l] : m.by_path) w.sample("acquires_started_total", path_label(p), l.acquires_started);
    w.family("waiters", "gauge", "Acquires in progress.");
    for (auto& [p, l] : m.by_path) w.sample("waiters", path_label(p), std::to_string(l.waiting));
    w.family("handoff_grants_total", "counter", "Grants passed on inside the process (local hand-off).");
    for (auto& [p, l] : m.by_path) w.sample("handoff_grants_total", path_label(p), l.handoff_grants);
    w.family("wait_seconds", "histogram", "Time from the start of an acquire to its grant.");
    for (auto& [p, l] : m.by_path) w.histogram("wait_seconds", path_label(p), l.wait);
    w.family("wait_seconds_max", "gauge", "Longest wait for a grant so far.");
    for (auto& [p, l] : m.by_path)
        w.sample("wait_seconds_max", path_label(p), number(static_cast<double>(l.wait.max_us) / 1e6));
    w.family("hold_seconds", "histogram", "Time from a grant to its release or loss.");
    for (auto& [p, l] : m.by_path) w.histogram("hold_seconds", path_label(p), l.hold);
    w.family("hold_seconds_max", "gauge", "Longest hold so far.");
    for (auto& [p, l] : m.by_path)
        w.sample("hold_seconds_max", path_label(p), number(static_cast<double>(l.hold.max_us) / 1e6));
    w.family("losses_total", "counter", "Held locks lost, by reason.");
    for (auto& [p, l] : m.by_path)
        for (std::size_t r = 0; r < loss_reason_count; ++r)
            w.sample("losses_total",
                     path_label(p) + ",reason=\"" + to_string(static_cast<loss_reason>(r)) + "\"",
                     l.losses[r]);

    w.family("reconnects_total", "counter", "Connections re-established with the same session.");
    w.sample("reconnects_total", "", m.reconnects);
    w.family("session_expiries_total", "counter", "Sessions expired by the server.");
    w.sample("session_expiries_total", "", m.expiries);
    w.family("background_delete_retries_total", "counter",
             "Guaranteed deletes retried (connection loss or another error: they never give up while the "
             "session lives).");
    w.sample("background_delete_retries_total", "", m.background_delete_retries);
    w.family("background_deletes_pending", "gauge", "Guaranteed deletes not done yet.");
    w.sample("background_deletes_pending", "", m.background_deletes_pending);
    w.family("background_delete_oldest_age_seconds", "gauge", "Age of the oldest pending guaranteed delete.");
    w.sample("background_delete_oldest_age_seconds", "",
             number(static_cast<double>(m.oldest_background_delete_age.count()) / 1e3));
    w.family("requests_total", "counter", "ZooKeeper requests sent by the lock recipes, by kind.");
    const auto& q = m.requests;
    for (auto [kind, v] : {std::pair{"create", q.creates},
                           {"delete", q.deletes},
                           {"get_children", q.get_children},
                           {"get_data", q.get_data},
                           {"exists", q.exists},
                           {"set_data", q.set_data},
                           {"remove_watches", q.watch_removals},
                           {"heartbeat", q.heartbeats},
                           {"touch", q.touches},
                           {"lease_renewal", q.lease_renewals},
                           {"multi", q.multis}})
        w.sample("requests_total", std::string("kind=\"") + kind + "\"", v);
    w.family("watch_events_total", "counter", "Node watch events delivered.");
    w.sample("watch_events_total", "", q.watch_events);
    return w.take();
}

} // namespace zklock
