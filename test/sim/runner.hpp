// What every world of the simulator shares: the seeded scheduler's weighted pick, the guids its
// clients name their nodes with, and the command line and seed loop (a run of seeds, a single
// seed replayed with its trace, a bug hunt that stops at its first find). Each call draws from the
// world's generator exactly as the worlds did before this file, so that a seed replays the same
// run and the seed counts in docs/internals.md stay valid.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace zklock::sim {

/// One action the scheduler may take now, and how likely it is against the others.
struct choice {
    int weight;
    std::function<void()> run;
};

/// Runs one of `enabled`, picked by weight (one draw of `rng`). False if none is enabled.
inline bool run_one(std::vector<choice>& enabled, std::mt19937_64& rng) {
    if (enabled.empty()) return false;
    int total = 0;
    for (auto& a : enabled) total += a.weight;
    int pick = static_cast<int>(rng() % static_cast<std::uint64_t>(total));
    for (auto& a : enabled) {
        if (pick < a.weight) {
            a.run();
            return true;
        }
        pick -= a.weight;
    }
    return true;
}

/// A guid in the 36-character form (32 draws of `rng`).
inline std::string random_guid(std::mt19937_64& rng) {
    static const char* hex = "0123456789abcdef";
    std::string g(36, '-');
    for (std::size_t i = 0; i < g.size(); ++i)
        if (i != 8 && i != 13 && i != 18 && i != 23) g[i] = hex[rng() % 16];
    return g;
}

/// The command line every world takes (--seeds N, --seed S, --first S, --trace, --bug NAME) and
/// its seed loop.
struct seed_runner {
    const char* program;
    std::uint64_t seeds = 1000, first = 1;
    std::optional<std::uint64_t> only; // --seed: that one, with its trace if --trace
    bool trace = false;
    std::string bug_name; // --bug: a hunt, which stops at its first find

    /// One seed's outcome.
    struct outcome {
        std::string violation; // empty: the seed passed
        std::uint64_t holds = 0;
        std::vector<std::string> trace;
    };

    /// Parses the command line. `more(option, next)` takes the world's own options (false if it
    /// does not know `option`; `next()` reads its value); `bug(name)` checks a --bug name. Exits
    /// with 2 and `usage` on anything else.
    template <class More, class Bug>
    void parse(int argc, char** argv, More&& more, Bug&& bug, const char* usage) {
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            auto next = [&]() -> std::string {
                if (i + 1 >= argc) {
                    std::fprintf(stderr, "%s: %s needs a value\n", program, a.c_str());
                    std::exit(2);
                }
                return argv[++i];
            };
            if (a == "--seeds")
                seeds = std::stoull(next());
            else if (a == "--seed")
                only = std::stoull(next());
            else if (a == "--first")
                first = std::stoull(next());
            else if (a == "--trace")
                trace = true;
            else if (a == "--bug")
                bug(bug_name = next());
            else if (!more(a, next)) {
                std::fprintf(stderr, "usage: %s %s\n", program, usage);
                std::exit(2);
            }
        }
        if (only) {
            first = *only;
            seeds = 1;
        }
    }

    /// Runs the seeds: `run(seed)` gives an outcome; `replay(seed)` the arguments that replay it
    /// (after the program's name); `shape` describes the run in the summary. Returns the exit
    /// status: a run passes when no seed failed, a hunt when one did.
    template <class Run, class Replay>
    int run(Run&& run_seed, Replay&& replay, const std::string& shape) const {
        const bool hunting = !bug_name.empty();
        const auto t0 = std::chrono::steady_clock::now();
        std::uint64_t failed = 0, holds = 0;
        std::optional<std::uint64_t> found;
        for (std::uint64_t s = first; s < first + seeds; ++s) {
            outcome o = run_seed(s);
            holds += o.holds;
            if (only && trace)
                for (auto& l : o.trace) std::printf("  %s\n", l.c_str());
            if (o.violation.empty()) continue;
            ++failed;
            if (!found) {
                found = s;
                std::printf("seed %llu: %s\n  replay: %s %s --trace%s%s\n",
                            static_cast<unsigned long long>(s), o.violation.c_str(), program,
                            replay(s).c_str(), hunting ? " --bug " : "", bug_name.c_str());
            }
            if (!only && hunting) break; // a bug hunt stops at its first find
        }
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const auto ran = found && hunting ? *found - first + 1 : seeds;
        std::printf("%s: %llu seed(s) from %llu, %s: %llu failed; %llu holds; %.2f s (%.0f lock cycles per "
                    "CPU second)\n",
                    program, static_cast<unsigned long long>(ran), static_cast<unsigned long long>(first),
                    shape.c_str(), static_cast<unsigned long long>(failed),
                    static_cast<unsigned long long>(holds), secs,
                    secs > 0 ? static_cast<double>(holds) / secs : 0.0);
        if (hunting) {
            if (found) {
                std::printf("%s: the re-introduced defect was found at seed %llu, after %llu seed(s)\n",
                            program, static_cast<unsigned long long>(*found),
                            static_cast<unsigned long long>(ran));
                return 0;
            }
            std::printf("%s: the re-introduced defect was NOT found in %llu seeds\n", program,
                        static_cast<unsigned long long>(seeds));
            return 1;
        }
        return failed == 0 ? 0 : 1;
    }
};

} // namespace zklock::sim
