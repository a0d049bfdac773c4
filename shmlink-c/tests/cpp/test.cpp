// The C++ wrapper's tests, one program: `test CASE NAME [PEER]` runs one case on names that start
// with NAME; run by tests/c.rs, plain and with -fsanitize=address,undefined. PEER is the C test
// program, for the case where a C++ end talks to a C one. `echo` and `publish` are peers for
// Python's tests (python/tests/test_cpp.py).

#include "shmlink.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#define ASSERT(cond)                                                                           \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            std::fprintf(stderr, "%s:%d: %s is false\n", __FILE__, __LINE__, #cond);           \
            std::exit(1);                                                                      \
        }                                                                                      \
    } while (0)

using namespace std::chrono_literals;

static std::string payload(std::uint32_t i, std::size_t size) {
    std::string m(size, '\0');
    for (std::size_t k = 0; k < size; k++) m[k] = static_cast<char>(i * 31u + k * 7u);
    return m;
}

static void reap(pid_t pid) {
    int status = 0;
    ASSERT(waitpid(pid, &status, 0) == pid);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static int echo(const std::string &name) {
    auto ch = shmlink::channel::connect(name, 10s);
    try {
        for (;;) {
            std::string copy;
            {
                shmlink::message m = ch.recv();
                copy = m.view();
            } // released here: the channel sends nothing while a message is held
            ch.send(copy);
        }
    } catch (const shmlink::error &e) {
        ASSERT(e.status() == SHMLINK_DISCONNECTED || e.status() == SHMLINK_PEER_GONE);
    }
    return 0;
}

static void errors(const std::string &base) {
    try {
        shmlink::channel::connect(base + "-nobody", 20ms);
        ASSERT(false);
    } catch (const shmlink::error &e) {
        ASSERT(e.status() == SHMLINK_NOT_FOUND);
        ASSERT(std::strstr(e.what(), "SHMLINK_NOT_FOUND") != nullptr);
        ASSERT(std::strstr(e.what(), "nobody") != nullptr);
    }
    auto a = shmlink::channel::create(base + "-err", 4096);
    auto b = shmlink::channel::connect(base + "-err");
    ASSERT(!b.try_recv());
    ASSERT(!b.recv_for(10ms));
    while (a.try_send(std::string(1000, 'x'))) {
    }
    ASSERT(!a.send_for(std::string(1000, 'y'), 10ms));
    std::vector<std::uint8_t> buf;
    ASSERT(b.recv_into(buf) == 1000 && buf.size() == 1000);
    // Moved from: the old handle owns nothing, the new one works.
    shmlink::channel moved = std::move(a);
    auto c = std::move(b);
    while (c.try_recv()) {
    }
    moved.send("after the move");
    ASSERT(c.recv().view() == "after the move");
}

static void pingpong(const std::string &base, const char *peer) {
    std::string name = base + "-pp";
    auto ch = shmlink::channel::create(name, 65536);
    pid_t pid = fork();
    if (pid == 0) {
        if (peer != nullptr) {
            execl(peer, peer, "echo", name.c_str(), static_cast<char *>(nullptr));
            std::_Exit(127);
        }
        std::exit(echo(name));
    }
    for (std::uint32_t i = 0; i < 300; i++) {
        std::string m = payload(i, (i * 997u) % 70000u);
        ch.send(m);
        auto back = ch.recv_for(10s);
        ASSERT(back && back->view() == m);
    }
    { shmlink::channel closing = std::move(ch); }
    reap(pid);
}

static void topics(const std::string &base) {
    std::string name = base + "-topic";
    pid_t pid = fork();
    if (pid == 0) {
        auto sub = shmlink::subscriber::connect(name, 0, 10s);
        for (std::uint32_t i = 0; i < 1000; i++) {
            auto m = sub.recv_for(10s);
            ASSERT(m && m->view() == payload(i, 200));
        }
        try {
            sub.recv();
            ASSERT(false);
        } catch (const shmlink::error &e) {
            ASSERT(e.status() == SHMLINK_DISCONNECTED);
        }
        std::exit(0);
    }
    {
        auto pub = shmlink::publisher::create(name);
        while (pub.subscribers() < 1) usleep(1000);
        for (std::uint32_t i = 0; i < 1000; i++) pub.publish(payload(i, 200));
    }
    reap(pid);

    auto pub = shmlink::publisher::create(base + "-ow", 4096, true);
    auto sub = shmlink::subscriber::connect(base + "-ow", 0, 1s);
    for (std::uint32_t i = 0; i < 200; i++) ASSERT(pub.try_publish(payload(i, 100)));
    try {
        sub.recv();
        ASSERT(false);
    } catch (const shmlink::lagged &e) {
        ASSERT(e.missed() > 0 && e.missed() < 200);
    }
    std::vector<std::uint8_t> buf;
    ASSERT(sub.recv_into(buf) == 100);
}

static void listeners(const std::string &base) {
    std::string name = base + "-svc";
    pid_t pid = fork();
    if (pid == 0) {
        auto ch = shmlink::channel::connect(name, 10s);
        ch.send("hello");
        ASSERT(ch.recv().view() == "HELLO");
        std::exit(0);
    }
    auto l = shmlink::listener::bind(name);
    auto conn = l.accept(10s);
    ASSERT(conn);
    std::string got{conn->recv().view()};
    for (auto &c : got) c = static_cast<char>(c - 'a' + 'A');
    conn->send(got);
    reap(pid);
    ASSERT(!l.accept(10ms));
}

// Publishes `n` messages ("message <i>") once a subscriber is there, then closes.
static void publish(const std::string &name, int n) {
    auto pub = shmlink::publisher::create(name);
    for (int waited = 0; pub.subscribers() < 1; waited++) {
        ASSERT(waited < 10000);
        usleep(1000);
    }
    for (int i = 0; i < n; i++) pub.publish("message " + std::to_string(i));
}

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s errors|pingpong|c-peer|topics|listeners|echo|publish NAME [PEER|N]\n", argv[0]);
        return 2;
    }
    std::string what = argv[1], name = argv[2];
    if (what == "errors") errors(name);
    else if (what == "pingpong") pingpong(name, nullptr);
    else if (what == "c-peer" && argc == 4) pingpong(name, argv[3]);
    else if (what == "topics") topics(name);
    else if (what == "listeners") listeners(name);
    else if (what == "echo") return echo(name);
    else if (what == "publish" && argc == 4) publish(name, std::atoi(argv[3]));
    else {
        std::fprintf(stderr, "no case %s\n", what.c_str());
        return 2;
    }
    std::printf("ok %s\n", what.c_str());
    return 0;
}
