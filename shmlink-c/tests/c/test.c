/* The C API's tests, one program: `test CASE NAME` runs one case on names that start with NAME
 * and exits 0 when it passed; a failed check prints where and why and exits 1. Run by
 * tests/c.rs, plain and with -fsanitize=address,undefined. Peers are this program's own forked
 * children (C to C) or, for `echo`, a Rust process that runs it (C to Rust). */

#define _GNU_SOURCE
#include "shmlink.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(call, want)                                                                      \
    do {                                                                                       \
        shmlink_status got_ = (call);                                                          \
        if (got_ != (want)) {                                                                  \
            fprintf(stderr, "%s:%d: %s gave %s, not %s: %s\n", __FILE__, __LINE__, #call,      \
                    shmlink_status_name(got_), shmlink_status_name(want), shmlink_last_error()); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#define ASSERT(cond)                                                                           \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "%s:%d: %s is false\n", __FILE__, __LINE__, #cond);                \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static char names[8][256];

static const char *named(int i, const char *base, const char *tail) {
    snprintf(names[i], sizeof names[i], "%s-%s", base, tail);
    return names[i];
}

/* Message i of `size` bytes: its index, then bytes that depend on it. */
static void message(uint8_t *m, size_t size, uint32_t i) {
    for (size_t k = 0; k < size; k++) m[k] = (uint8_t)(i * 31u + k * 7u);
    if (size >= 4) memcpy(m, &i, 4);
}

static void reap(pid_t pid) {
    int status = 0;
    ASSERT(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child %d failed (status %d)\n", (int)pid, status);
        exit(1);
    }
}

/* Every error a caller can reach without a peer misbehaving. */
static void errors(const char *base) {
    const char *name = named(0, base, "err");
    shmlink_channel *ch = NULL;
    CHECK(shmlink_channel_create(NULL, 0, &ch), SHMLINK_INVALID_ARGUMENT);
    ASSERT(strstr(shmlink_last_error(), "NULL") != NULL);
    CHECK(shmlink_channel_create(name, 0, NULL), SHMLINK_INVALID_ARGUMENT);
    CHECK(shmlink_channel_create("no/slashes", 0, &ch), SHMLINK_INVALID_ARGUMENT);
    CHECK(shmlink_channel_create(name, 1000, &ch), SHMLINK_INVALID_ARGUMENT);
    CHECK(shmlink_channel_connect(named(1, base, "nobody"), 20, &ch), SHMLINK_NOT_FOUND);
    ASSERT(strstr(shmlink_last_error(), "nobody") != NULL);
    CHECK(shmlink_send(NULL, "x", 1), SHMLINK_INVALID_ARGUMENT);
    shmlink_channel_close(NULL);

    shmlink_channel *a, *b, *again;
    CHECK(shmlink_channel_create(name, 4096, &a), SHMLINK_OK);
    CHECK(shmlink_channel_create(name, 4096, &again), SHMLINK_ALREADY_EXISTS);
    CHECK(shmlink_channel_connect(name, 1000, &b), SHMLINK_OK);
    const uint8_t *data;
    size_t len;
    CHECK(shmlink_try_recv(b, &data, &len), SHMLINK_EMPTY);
    CHECK(shmlink_recv_timeout(b, &data, &len, 10), SHMLINK_TIMEOUT);
    CHECK(shmlink_recv(b, NULL, &len), SHMLINK_INVALID_ARGUMENT);
    CHECK(shmlink_send(a, NULL, 3), SHMLINK_INVALID_ARGUMENT);
    CHECK(shmlink_release(b), SHMLINK_INVALID_ARGUMENT);
    CHECK(shmlink_commit(a, 0), SHMLINK_INVALID_ARGUMENT);

    /* A full ring: try_send is FULL, send_timeout TIMEOUT. */
    uint8_t m[1000];
    int sent = 0;
    shmlink_status s;
    while ((s = shmlink_try_send(a, m, sizeof m)) == SHMLINK_OK) sent++;
    CHECK(s, SHMLINK_FULL);
    CHECK(shmlink_send_timeout(a, m, sizeof m, 10), SHMLINK_TIMEOUT);
    ASSERT(sent >= 1);

    /* A buffer too small keeps the message; a large enough one takes it. */
    uint8_t small[10], whole[1000];
    CHECK(shmlink_recv_into(b, small, sizeof small, &len), SHMLINK_BUFFER_TOO_SMALL);
    ASSERT(len == sizeof m);
    CHECK(shmlink_recv_into(b, NULL, 5, &len), SHMLINK_INVALID_ARGUMENT);
    CHECK(shmlink_recv_into(b, whole, sizeof whole, &len), SHMLINK_OK);
    ASSERT(len == sizeof m);
    for (int i = 1; i < sent; i++) CHECK(shmlink_recv_into(b, whole, sizeof whole, &len), SHMLINK_OK);
    CHECK(shmlink_try_recv_into(b, whole, sizeof whole, &len), SHMLINK_EMPTY);

    /* A reservation: written in place, committed; used past it is refused; busy meanwhile. */
    void *w;
    CHECK(shmlink_reserve(a, 16, &w), SHMLINK_OK);
    memcpy(w, "written in place", 16);
    CHECK(shmlink_send(a, "x", 1), SHMLINK_BUSY);
    CHECK(shmlink_reserve(a, 16, &w), SHMLINK_BUSY);
    CHECK(shmlink_commit(a, 17), SHMLINK_INVALID_ARGUMENT);
    CHECK(shmlink_commit(a, 16), SHMLINK_OK);
    CHECK(shmlink_recv(b, &data, &len), SHMLINK_OK);
    ASSERT(len == 16 && memcmp(data, "written in place", 16) == 0);
    /* Held: every receive gives it again until the release. */
    const uint8_t *again_data;
    CHECK(shmlink_try_recv(b, &again_data, &len), SHMLINK_OK);
    ASSERT(again_data == data && len == 16);
    CHECK(shmlink_release(b), SHMLINK_OK);

    /* The counters, as JSON. */
    char doc[8192];
    CHECK(shmlink_stats_json(name, doc, 4, &len), SHMLINK_BUFFER_TOO_SMALL);
    ASSERT(len > 4);
    CHECK(shmlink_stats_json(name, doc, sizeof doc, &len), SHMLINK_OK);
    ASSERT(strlen(doc) == len && strstr(doc, "\"messages\"") != NULL);

    /* The creator closes: the other end is told after what was sent. */
    CHECK(shmlink_send(a, "last", 4), SHMLINK_OK);
    shmlink_channel_close(a);
    CHECK(shmlink_recv_into(b, whole, sizeof whole, &len), SHMLINK_OK);
    ASSERT(len == 4 && memcmp(whole, "last", 4) == 0);
    CHECK(shmlink_recv_into(b, whole, sizeof whole, &len), SHMLINK_DISCONNECTED);
    CHECK(shmlink_send(b, "x", 1), SHMLINK_DISCONNECTED);
    shmlink_channel_close(b);

    ASSERT(strcmp(shmlink_status_name(SHMLINK_PEER_GONE), "SHMLINK_PEER_GONE") == 0);
}

/* Echoes every message on the channel `name` (connecting to it) until it ends. */
static int echo(const char *name) {
    shmlink_channel *ch;
    CHECK(shmlink_channel_connect(name, 10000, &ch), SHMLINK_OK);
    const uint8_t *data;
    size_t len;
    for (;;) {
        shmlink_status s = shmlink_recv(ch, &data, &len);
        if (s == SHMLINK_DISCONNECTED || s == SHMLINK_PEER_GONE) break;
        CHECK(s, SHMLINK_OK);
        /* The reply is copied out first: the channel sends nothing while a message is held. */
        uint8_t *copy = malloc(len ? len : 1);
        ASSERT(copy != NULL);
        memcpy(copy, data, len);
        CHECK(shmlink_release(ch), SHMLINK_OK);
        CHECK(shmlink_send(ch, copy, len), SHMLINK_OK);
        free(copy);
    }
    shmlink_channel_close(ch);
    return 0;
}

/* Round trips with a forked C peer, sizes from 0 to past one frame (the send streams it). */
static void pingpong(const char *base) {
    const char *name = named(0, base, "pp");
    shmlink_channel *a;
    CHECK(shmlink_channel_create(name, 65536, &a), SHMLINK_OK);
    pid_t pid = fork();
    if (pid == 0) exit(echo(name));
    static uint8_t m[100000], back[100000];
    size_t sizes[] = {0, 1, 64, 4096, 32000, 100000};
    for (uint32_t i = 0; i < 600; i++) {
        size_t size = sizes[i % 6];
        message(m, size, i);
        CHECK(shmlink_send(a, m, size), SHMLINK_OK);
        size_t len;
        CHECK(shmlink_recv_into_timeout(a, back, sizeof back, &len, 10000), SHMLINK_OK);
        ASSERT(len == size && memcmp(back, m, size) == 0);
    }
    shmlink_channel_close(a);
    reap(pid);
}

/* A peer killed mid-stream: the messages it sent arrive, then PEER_GONE. */
static void killed(const char *base) {
    const char *name = named(0, base, "kill");
    shmlink_channel *a;
    CHECK(shmlink_channel_create(name, 65536, &a), SHMLINK_OK);
    pid_t pid = fork();
    if (pid == 0) {
        shmlink_channel *b;
        CHECK(shmlink_channel_connect(name, 10000, &b), SHMLINK_OK);
        uint8_t m[256];
        for (uint32_t i = 0;; i++) {
            message(m, sizeof m, i);
            CHECK(shmlink_send(b, m, sizeof m), SHMLINK_OK);
        }
    }
    uint8_t m[256], want[256];
    size_t len;
    uint32_t got = 0;
    for (; got < 1000; got++) {
        CHECK(shmlink_recv_into_timeout(a, m, sizeof m, &len, 10000), SHMLINK_OK);
        message(want, sizeof want, got);
        ASSERT(len == sizeof m && memcmp(m, want, len) == 0);
    }
    ASSERT(kill(pid, SIGKILL) == 0);
    int status;
    ASSERT(waitpid(pid, &status, 0) == pid);
    shmlink_status s;
    while ((s = shmlink_recv_into_timeout(a, m, sizeof m, &len, 10000)) == SHMLINK_OK) {
        message(want, sizeof want, got++);
        ASSERT(len == sizeof m && memcmp(m, want, len) == 0);
    }
    CHECK(s, SHMLINK_PEER_GONE);
    ASSERT(strstr(shmlink_last_error(), "gone") != NULL);
    shmlink_channel_close(a);
}

/* A listener: forked clients connect by name and get their replies. (The clients are forked
 * before the listener exists, and connect when it does: a child forked later would hold a copy
 * of the listener's memory that it never frees, which LeakSanitizer reports.) */
static void listener(const char *base) {
    const char *name = named(0, base, "svc");
    pid_t pids[3];
    for (int c = 0; c < 3; c++) {
        pids[c] = fork();
        if (pids[c] == 0) {
            shmlink_channel *ch;
            CHECK(shmlink_channel_connect(name, 10000, &ch), SHMLINK_OK);
            uint8_t m[100], back[100];
            size_t len;
            for (uint32_t i = 0; i < 100; i++) {
                message(m, sizeof m, i + 1000u * (uint32_t)c);
                CHECK(shmlink_send(ch, m, sizeof m), SHMLINK_OK);
                CHECK(shmlink_recv_into_timeout(ch, back, sizeof back, &len, 10000), SHMLINK_OK);
                ASSERT(len == sizeof m && memcmp(back, m, len) == 0);
            }
            shmlink_channel_close(ch);
            exit(0);
        }
    }
    shmlink_listener *l;
    CHECK(shmlink_listener_bind(name, &l), SHMLINK_OK);
    for (int c = 0; c < 3; c++) {
        shmlink_channel *conn;
        CHECK(shmlink_listener_accept(l, 10000, &conn), SHMLINK_OK);
        const uint8_t *data;
        size_t len;
        uint8_t copy[100];
        shmlink_status s;
        while ((s = shmlink_recv(conn, &data, &len)) == SHMLINK_OK) {
            ASSERT(len == sizeof copy);
            memcpy(copy, data, len);
            CHECK(shmlink_release(conn), SHMLINK_OK);
            CHECK(shmlink_send(conn, copy, len), SHMLINK_OK);
        }
        CHECK(s, SHMLINK_DISCONNECTED);
        shmlink_channel_close(conn);
    }
    shmlink_channel *none;
    CHECK(shmlink_listener_accept(l, 10, &none), SHMLINK_TIMEOUT);
    shmlink_listener_close(l);
    for (int c = 0; c < 3; c++) reap(pids[c]);
}

/* A topic: two forked subscribers each get every message in order; an overwrite subscriber
 * that falls behind is told how many it missed. */
static void topic(const char *base) {
    const char *name = named(0, base, "topic");
    shmlink_publisher *p;
    CHECK(shmlink_publisher_create(name, 0, 0, &p), SHMLINK_OK);
    pid_t pids[2];
    for (int k = 0; k < 2; k++) {
        pids[k] = fork();
        if (pids[k] == 0) {
            shmlink_subscriber *s;
            CHECK(shmlink_subscriber_connect(name, 0, 10000, &s), SHMLINK_OK);
            uint8_t m[512], want[512];
            size_t len;
            for (uint32_t i = 0; i < 5000; i++) {
                CHECK(shmlink_subscriber_recv_into_timeout(s, m, sizeof m, &len, 10000), SHMLINK_OK);
                message(want, 512, i);
                ASSERT(len == 512 && memcmp(m, want, len) == 0);
            }
            CHECK(shmlink_subscriber_recv_into_timeout(s, m, sizeof m, &len, 10000), SHMLINK_DISCONNECTED);
            shmlink_subscriber_close(s);
            exit(0);
        }
    }
    while (shmlink_publisher_subscribers(p) < 2) usleep(1000);
    uint8_t m[512];
    for (uint32_t i = 0; i < 5000; i++) {
        message(m, sizeof m, i);
        CHECK(shmlink_publish_timeout(p, m, sizeof m, 10000), SHMLINK_OK);
    }
    shmlink_publisher_close(p);
    reap(pids[0]);
    reap(pids[1]);

    const char *ow = named(1, base, "ow");
    CHECK(shmlink_publisher_create(ow, 4096, 1, &p), SHMLINK_OK);
    shmlink_subscriber *s;
    CHECK(shmlink_subscriber_connect(ow, 0, 1000, &s), SHMLINK_OK);
    for (uint32_t i = 0; i < 200; i++) {
        message(m, 100, i);
        CHECK(shmlink_try_publish(p, m, 100), SHMLINK_OK);
    }
    size_t len;
    CHECK(shmlink_subscriber_try_recv_into(s, m, sizeof m, &len), SHMLINK_LAGGED);
    uint64_t missed = shmlink_last_missed();
    ASSERT(missed > 0 && missed < 200);
    uint64_t got = 0;
    while (shmlink_subscriber_try_recv_into(s, m, sizeof m, &len) == SHMLINK_OK) got++;
    ASSERT(missed + got == 200);
    const uint8_t *data;
    CHECK(shmlink_subscriber_try_recv(s, &data, &len), SHMLINK_EMPTY);
    shmlink_subscriber_close(s);
    shmlink_publisher_close(p);
}

/* A selector over channels and a subscriber: it says which are ready, refuses a handle twice or
 * one that holds a message, and the handles work as before after it. */
static void selector(const char *base) {
    shmlink_channel *a[3], *b[3];
    for (int i = 0; i < 3; i++) {
        char tail[16];
        snprintf(tail, sizeof tail, "sel%d", i);
        const char *name = named(i, base, tail);
        CHECK(shmlink_channel_create(name, 4096, &a[i]), SHMLINK_OK);
        CHECK(shmlink_channel_connect(name, 1000, &b[i]), SHMLINK_OK);
    }
    shmlink_publisher *p;
    shmlink_subscriber *s;
    CHECK(shmlink_publisher_create(named(3, base, "seltopic"), 0, 0, &p), SHMLINK_OK);
    CHECK(shmlink_subscriber_connect(names[3], 0, 1000, &s), SHMLINK_OK);

    shmlink_selector *sel;
    CHECK(shmlink_selector_new(&sel), SHMLINK_OK);
    size_t ready[4], n;
    CHECK(shmlink_selector_wait(sel, a, 3, &s, 1, 10, ready, &n), SHMLINK_TIMEOUT);
    ASSERT(n == 0);
    CHECK(shmlink_send(b[1], "one", 3), SHMLINK_OK);
    CHECK(shmlink_selector_wait(sel, a, 3, &s, 1, 5000, ready, &n), SHMLINK_OK);
    ASSERT(n == 1 && ready[0] == 1);
    CHECK(shmlink_publish(p, "all", 3), SHMLINK_OK);
    CHECK(shmlink_selector_wait(sel, a, 3, &s, 1, 5000, ready, &n), SHMLINK_OK);
    ASSERT(n == 2);
    ASSERT((ready[0] == 1 && ready[1] == 3) || (ready[0] == 3 && ready[1] == 1));

    shmlink_channel *twice[2] = {a[0], a[0]};
    CHECK(shmlink_selector_wait(sel, twice, 2, NULL, 0, 10, ready, &n), SHMLINK_INVALID_ARGUMENT);
    const uint8_t *data;
    size_t len;
    CHECK(shmlink_recv(a[1], &data, &len), SHMLINK_OK);
    ASSERT(len == 3 && memcmp(data, "one", 3) == 0);
    CHECK(shmlink_selector_wait(sel, a, 3, NULL, 0, 10, ready, &n), SHMLINK_BUSY);
    CHECK(shmlink_release(a[1]), SHMLINK_OK);
    uint8_t buf[8];
    CHECK(shmlink_subscriber_recv_into(s, buf, sizeof buf, &len), SHMLINK_OK);
    ASSERT(len == 3 && memcmp(buf, "all", 3) == 0);

    /* After the waits, both ways of every channel still work. */
    for (int i = 0; i < 3; i++) {
        CHECK(shmlink_send(a[i], "back", 4), SHMLINK_OK);
        CHECK(shmlink_recv_into_timeout(b[i], buf, sizeof buf, &len, 1000), SHMLINK_OK);
        ASSERT(len == 4 && memcmp(buf, "back", 4) == 0);
    }
    shmlink_selector_close(sel);
    shmlink_subscriber_close(s);
    shmlink_publisher_close(p);
    for (int i = 0; i < 3; i++) {
        shmlink_channel_close(b[i]);
        shmlink_channel_close(a[i]);
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s errors|pingpong|killed|listener|topic|selector|echo NAME\n", argv[0]);
        return 2;
    }
    const char *what = argv[1], *name = argv[2];
    if (strcmp(what, "errors") == 0) errors(name);
    else if (strcmp(what, "pingpong") == 0) pingpong(name);
    else if (strcmp(what, "killed") == 0) killed(name);
    else if (strcmp(what, "listener") == 0) listener(name);
    else if (strcmp(what, "topic") == 0) topic(name);
    else if (strcmp(what, "selector") == 0) selector(name);
    else if (strcmp(what, "echo") == 0) return echo(name);
    else {
        fprintf(stderr, "no case %s\n", what);
        return 2;
    }
    printf("ok %s\n", what);
    return 0;
}
