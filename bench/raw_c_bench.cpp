// The raw ZooKeeper C client, as a baseline for bench/compare.
//   zk_raw_bench loop      CONNECT WORKERS LOCKS SECONDS   one session + thread per worker:
//                          create(ephemeral sequential) + getChildren + delete, synchronously
//   zk_raw_bench pipelined CONNECT WINDOW SECONDS          one session, async create/delete pairs with
//                          WINDOW pairs in flight: the server's write ceiling
//   zk_raw_bench pipelined CONNECT WINDOW SECONDS lock     the same with a lock cycle's three requests:
//                          create + getChildren of its parent (sent together), then delete; each
//                          of the WINDOW slots in a parent of its own (as 32s-32l's locks)
//   zk_raw_bench ring      CONNECT SESSIONS SECONDS        the hand-off ceiling of a contended lock: SESSIONS
//                          sessions in one queue, each watching its predecessor's node; the one
//                          notified holds, deletes its node (which notifies the next) and queues
//                          again (create + getChildren + exists, off the chain). The chain per
//                          hand-off: one delete's commit plus one watch delivery
//   zk_raw_bench rtt       CONNECT SECONDS                 one session, one request at a time: the round
//                          trip of a read (exists) and of a write (create of an ephemeral node,
//                          then its delete, each timed): the unit of bench/compare's "round trips
//                          per cycle"
// Prints one JSON object like zklock_bench.
#include <zookeeper/zookeeper.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using clk = std::chrono::steady_clock;

static zhandle_t* connect_zk(const char* hosts) {
    std::mutex mu;
    std::condition_variable cv;
    bool up = false;
    struct ctx_t {
        std::mutex* mu;
        std::condition_variable* cv;
        bool* up;
    } ctx{&mu, &cv, &up};
    zhandle_t* zh = zookeeper_init(
        hosts,
        [](zhandle_t*, int type, int state, const char*, void* c) {
            auto* x = static_cast<ctx_t*>(c);
            if (!x) return;
            if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE) {
                std::lock_guard lk(*x->mu);
                *x->up = true;
                x->cv->notify_all();
            }
        },
        10000, nullptr, &ctx, 0);
    // Like zklock: no host name resolution on every I/O loop iteration (the C client's default,
    // which costs a getaddrinfo per iteration and would make this floor unfairly slow).
    if (zh) zoo_set_servers_resolution_delay(zh, -1);
    std::unique_lock lk(mu);
    if (!zh || !cv.wait_for(lk, std::chrono::seconds(10), [&] { return up; })) {
        std::fprintf(stderr, "connect failed\n");
        std::exit(1);
    }
    zoo_set_context(zh, nullptr);
    return zh;
}

static double cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/// What a pipelined run measured: the operations counted, over how long, at what CPU.
struct measured {
    long n;
    double wall, cpu;
};

/// A pipelined run's measurement: after a second of warm-up, what `counter` counts for `seconds`;
/// then the pipeline is stopped and what is in flight awaited.
static measured measure_then_stop(const std::atomic<long>& counter, double seconds, std::atomic<bool>& stop,
                                  const std::atomic<int>& inflight) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const long c0 = counter;
    const double cpu0 = cpu_seconds();
    const auto t0 = clk::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    measured m{counter - c0, std::chrono::duration<double>(clk::now() - t0).count(), cpu_seconds() - cpu0};
    stop = true;
    while (inflight > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return m;
}

static void ensure(zhandle_t* zh, const std::string& path) {
    for (std::size_t at = path.find('/', 1);; at = path.find('/', at + 1)) {
        auto p = path.substr(0, at);
        zoo_create(zh, p.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
        if (at == std::string::npos) break;
    }
}

int main(int argc, char** argv) {
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    if (argc < 2) return 2;
    std::string mode = argv[1];
    const std::string base = "/zklock-bench/raw-" + std::to_string(::getpid());
    if (mode == "loop" && argc == 6) {
        const char* hosts = argv[2];
        int workers = std::atoi(argv[3]), locks = std::atoi(argv[4]);
        double seconds = std::atof(argv[5]);
        std::atomic<bool> measuring{false}, stop{false};
        std::vector<std::vector<double>> lat(workers);
        std::vector<long> cycles(workers);
        std::vector<std::thread> ts;
        for (int w = 0; w < workers; ++w)
            ts.emplace_back([&, w] {
                zhandle_t* zh = connect_zk(hosts);
                std::string dir = base + "/lock-" + std::to_string(w % locks);
                ensure(zh, dir);
                std::string prefix = dir + "/n-";
                char created[512];
                while (!stop) {
                    auto t0 = clk::now();
                    if (zoo_create(zh, prefix.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE,
                                   ZOO_EPHEMERAL_SEQUENTIAL, created, sizeof created) != ZOK)
                        break;
                    String_vector kids{};
                    zoo_get_children(zh, dir.c_str(), 0, &kids);
                    deallocate_String_vector(&kids);
                    auto t1 = clk::now();
                    zoo_delete(zh, created, -1);
                    if (measuring) {
                        lat[w].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
                        ++cycles[w];
                    }
                }
                zookeeper_close(zh);
            });
        std::this_thread::sleep_for(std::chrono::seconds(1));
        double cpu0 = cpu_seconds();
        auto t0 = clk::now();
        measuring = true;
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
        measuring = false;
        double wall = std::chrono::duration<double>(clk::now() - t0).count();
        double cpu = cpu_seconds() - cpu0;
        stop = true;
        for (auto& t : ts) t.join();
        std::vector<double> all;
        long n = 0;
        for (int w = 0; w < workers; ++w) {
            all.insert(all.end(), lat[w].begin(), lat[w].end());
            n += cycles[w];
        }
        std::sort(all.begin(), all.end());
        auto pct = [&](double p) {
            return all.empty() ? 0.0 : all[std::min(all.size() - 1, std::size_t(p * all.size()))];
        };
        rusage ru{};
        getrusage(RUSAGE_SELF, &ru);
        std::printf("{\"impl\":\"raw-c\",\"workers\":%d,\"sessions\":%d,\"locks\":%d,\"hold_ms\":0,"
                    "\"cycles\":%ld,\"seconds\":%.3f,"
                    "\"cycles_per_s\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,\"requests_per_"
                    "cycle\":3.00,"
                    "\"cpu_us_per_cycle\":%.1f,\"peak_rss_kb\":%ld,\"overlaps\":0}\n",
                    workers, workers, locks, n, wall, n / wall, pct(0.5), pct(0.99),
                    all.empty() ? 0.0 : all.back(), n ? cpu * 1e6 / n : 0.0, ru.ru_maxrss);
        return 0;
    }
    if (mode == "rtt" && argc == 4) {
        zhandle_t* zh = connect_zk(argv[2]);
        const double seconds = std::atof(argv[3]);
        const std::string dir = base + "/rtt";
        ensure(zh, dir);
        const std::string node = dir + "/n";
        std::vector<double> reads, writes;
        const auto us = [](clk::time_point a, clk::time_point b) {
            return std::chrono::duration<double, std::micro>(b - a).count();
        };
        const auto t0 = clk::now();
        while (std::chrono::duration<double>(clk::now() - t0).count() < seconds) {
            Stat st{};
            auto a = clk::now();
            if (zoo_exists(zh, "/", 0, &st) != ZOK) {
                std::fprintf(stderr, "exists failed\n");
                return 1;
            }
            auto b = clk::now();
            if (zoo_create(zh, node.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, nullptr, 0) !=
                ZOK) {
                std::fprintf(stderr, "create failed\n");
                return 1;
            }
            auto c = clk::now();
            if (zoo_delete(zh, node.c_str(), -1) != ZOK) {
                std::fprintf(stderr, "delete failed\n");
                return 1;
            }
            auto d = clk::now();
            reads.push_back(us(a, b));
            writes.push_back(us(b, c));
            writes.push_back(us(c, d));
        }
        const double wall = std::chrono::duration<double>(clk::now() - t0).count();
        zoo_delete(zh, dir.c_str(), -1);
        zookeeper_close(zh);
        const auto median = [](std::vector<double> v) {
            std::sort(v.begin(), v.end());
            return v.empty() ? 0.0 : v[v.size() / 2];
        };
        const double r = median(reads), w = median(writes);
        std::printf(
            "{\"impl\":\"raw-c-rtt\",\"workers\":1,\"sessions\":1,\"locks\":0,\"hold_ms\":0,\"cycles\":%zu,"
            "\"seconds\":%.3f,\"cycles_per_s\":%.1f,\"p50_us\":%.1f,\"p99_us\":0,\"max_us\":0,"
            "\"read_rtt_us\":%.1f,\"write_rtt_us\":%.1f,\"requests_per_cycle\":3.00,\"cpu_us_per_cycle\":0,"
            "\"peak_rss_kb\":0,\"overlaps\":0}\n",
            reads.size(), wall, reads.size() / wall, r + 2 * w, r, w);
        return 0;
    }
    if (mode == "pipelined" && argc == 6 && std::string(argv[5]) == "lock") {
        zhandle_t* zh = connect_zk(argv[2]);
        int window = std::atoi(argv[3]);
        double seconds = std::atof(argv[4]);
        struct state_t {
            zhandle_t* zh;
            std::atomic<long> cycles{0};
            std::atomic<bool> stop{false};
            std::atomic<int> inflight{0};
        } st;
        st.zh = zh;
        struct slot_t {
            state_t* s;
            std::string dir, prefix, created;
        };
        std::vector<slot_t> slots(window);
        for (int i = 0; i < window; ++i) {
            slots[i].s = &st;
            slots[i].dir = base + "/pipe-" + std::to_string(i);
            slots[i].prefix = slots[i].dir + "/n-";
            ensure(zh, slots[i].dir);
        }
        struct op {
            static void start(slot_t* sl) {
                sl->s->inflight++;
                // create, and the listing right behind it (answered after the create, in order)
                zoo_acreate(
                    sl->s->zh, sl->prefix.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE,
                    ZOO_EPHEMERAL_SEQUENTIAL,
                    [](int rc, const char* value, const void* d) {
                        auto* sl = static_cast<slot_t*>(const_cast<void*>(d));
                        sl->created = rc == ZOK && value ? value : "";
                    },
                    sl);
                zoo_aget_children(
                    sl->s->zh, sl->dir.c_str(), 0,
                    [](int, const String_vector*, const void* d) {
                        auto* sl = static_cast<slot_t*>(const_cast<void*>(d));
                        if (sl->created.empty()) {
                            sl->s->inflight--;
                            return;
                        }
                        zoo_adelete(
                            sl->s->zh, sl->created.c_str(), -1,
                            [](int, const void* d) {
                                auto* sl = static_cast<slot_t*>(const_cast<void*>(d));
                                sl->s->cycles++;
                                sl->s->inflight--;
                                if (!sl->s->stop) start(sl);
                            },
                            sl);
                    },
                    sl);
            }
        };
        for (auto& sl : slots) op::start(&sl);
        const auto [n, wall, cpu] = measure_then_stop(st.cycles, seconds, st.stop, st.inflight);
        for (auto& sl : slots) zoo_delete(zh, sl.dir.c_str(), -1);
        zookeeper_close(zh);
        std::printf(
            "{\"impl\":\"raw-c-pipelined-lock\",\"workers\":%d,\"sessions\":1,\"locks\":%d,\"hold_ms\":0,"
            "\"cycles\":%ld,"
            "\"seconds\":%.3f,\"cycles_per_s\":%.1f,\"p50_us\":0,\"p99_us\":0,\"max_us\":0,"
            "\"requests_per_cycle\":3.00,"
            "\"cpu_us_per_cycle\":%.1f,\"peak_rss_kb\":0,\"overlaps\":0}\n",
            window, window, n, wall, n / wall, n ? cpu * 1e6 / n : 0.0);
        return 0;
    }
    if (mode == "pipelined" && argc == 5) {
        zhandle_t* zh = connect_zk(argv[2]);
        int window = std::atoi(argv[3]);
        double seconds = std::atof(argv[4]);
        std::string dir = base + "/pipe";
        ensure(zh, dir);
        struct state_t {
            zhandle_t* zh;
            std::string prefix;
            std::atomic<long> pairs{0};
            std::atomic<bool> stop{false};
            std::atomic<int> inflight{0};
        } st;
        st.zh = zh;
        st.prefix = dir + "/n-";
        struct op {
            static void start(state_t* s) {
                s->inflight++;
                zoo_acreate(
                    s->zh, s->prefix.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                    [](int rc, const char* value, const void* d) {
                        auto* s = static_cast<state_t*>(const_cast<void*>(d));
                        if (rc != ZOK) {
                            s->inflight--;
                            return;
                        }
                        zoo_adelete(
                            s->zh, value, -1,
                            [](int, const void* d) {
                                auto* s = static_cast<state_t*>(const_cast<void*>(d));
                                s->pairs++;
                                s->inflight--;
                                if (!s->stop) start(s);
                            },
                            d);
                    },
                    s);
            }
        };
        for (int i = 0; i < window; ++i) op::start(&st);
        const auto [n, wall, cpu] = measure_then_stop(st.pairs, seconds, st.stop, st.inflight);
        zookeeper_close(zh);
        std::printf("{\"impl\":\"raw-c-pipelined\",\"workers\":%d,\"sessions\":1,\"locks\":0,\"hold_ms\":0,"
                    "\"cycles\":%ld,"
                    "\"seconds\":%.3f,\"cycles_per_s\":%.1f,\"p50_us\":0,\"p99_us\":0,\"max_us\":0,"
                    "\"requests_per_cycle\":2.00,"
                    "\"cpu_us_per_cycle\":%.1f,\"peak_rss_kb\":0,\"overlaps\":0}\n",
                    window, n, wall, n / wall, n ? cpu * 1e6 / n : 0.0);
        return 0;
    }
    if (mode == "ring" && argc == 5) {
        const int sessions = std::atoi(argv[3]);
        const double seconds = std::atof(argv[4]);
        const std::string dir = base + "/ring";
        struct member {
            zhandle_t* zh = nullptr;
            std::string dir, node;
            std::atomic<long>* handoffs = nullptr;
            std::atomic<bool>* stop = nullptr;
        };
        std::atomic<long> handoffs{0};
        std::atomic<bool> stop{false};
        std::vector<member> ms(static_cast<std::size_t>(sessions));
        struct ring {
            static void queue(member* m) {
                if (*m->stop) return;
                zoo_acreate(
                    m->zh, (m->dir + "/n-").c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE,
                    ZOO_EPHEMERAL_SEQUENTIAL,
                    [](int rc, const char* value, const void* d) {
                        auto* m = static_cast<member*>(const_cast<void*>(d));
                        if (rc != ZOK) return;
                        m->node = value;
                        look(m);
                    },
                    m);
            }
            static void look(member* m) {
                zoo_aget_children(
                    m->zh, m->dir.c_str(), 0,
                    [](int rc, const String_vector* v, const void* d) {
                        auto* m = static_cast<member*>(const_cast<void*>(d));
                        if (rc != ZOK || !v) return;
                        std::vector<std::string> kids(v->data, v->data + v->count);
                        std::sort(kids.begin(), kids.end()); // ("n-" + 10 digits: as strings = by number)
                        auto mine = m->node.substr(m->dir.size() + 1);
                        auto it = std::find(kids.begin(), kids.end(), mine);
                        if (it == kids.end()) return;
                        if (it == kids.begin()) return hold(m);
                        auto pred = m->dir + "/" + *(it - 1);
                        zoo_awexists(
                            m->zh, pred.c_str(),
                            [](zhandle_t*, int type, int, const char*, void* c) {
                                if (type == ZOO_DELETED_EVENT)
                                    hold(static_cast<member*>(c)); // (nobody gives up here)
                            },
                            m,
                            [](int rc, const Stat*, const void* d) {
                                if (rc == ZNONODE)
                                    look(static_cast<member*>(const_cast<void*>(d))); // gone already
                            },
                            m);
                    },
                    m);
            }
            static void hold(member* m) {
                ++*m->handoffs;
                zoo_adelete(
                    m->zh, m->node.c_str(), -1, [](int, const void*) {}, nullptr); // notifies the next
                queue(m);
            }
        };
        for (auto& m : ms) {
            m.zh = connect_zk(argv[2]);
            m.dir = dir;
            m.handoffs = &handoffs;
            m.stop = &stop;
        }
        ensure(ms[0].zh, dir);
        for (auto& m : ms) ring::queue(&m);
        std::this_thread::sleep_for(std::chrono::seconds(1));
        long h0 = handoffs;
        double cpu0 = cpu_seconds();
        auto t0 = clk::now();
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
        long n = handoffs - h0;
        double wall = std::chrono::duration<double>(clk::now() - t0).count();
        double cpu = cpu_seconds() - cpu0;
        stop = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        for (auto& m : ms) zookeeper_close(m.zh);
        std::printf("{\"impl\":\"raw-c-ring\",\"workers\":%d,\"sessions\":%d,\"locks\":1,\"hold_ms\":0,"
                    "\"cycles\":%ld,"
                    "\"seconds\":%.3f,\"cycles_per_s\":%.1f,\"p50_us\":0,\"p99_us\":0,\"max_us\":0,"
                    "\"requests_per_cycle\":4.00,"
                    "\"cpu_us_per_cycle\":%.1f,\"peak_rss_kb\":0,\"overlaps\":0}\n",
                    sessions, sessions, n, wall, n / wall, n ? cpu * 1e6 / n : 0.0);
        return 0;
    }
    std::fprintf(
        stderr,
        "usage: zk_raw_bench loop CONNECT WORKERS LOCKS SECONDS | pipelined CONNECT WINDOW SECONDS [lock] | "
        "ring CONNECT SESSIONS SECONDS\n");
    return 2;
}
