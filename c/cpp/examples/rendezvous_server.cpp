// rendezvous_server: listen on SOCKET, accept CALLERS callers and answer
// each request [a, b] with [a + b] until every caller has hung up.
//   rendezvous_server /tmp/rdv.sock 2 & rendezvous_client /tmp/rdv.sock & rendezvous_client /tmp/rdv.sock
#include <zcio.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: rendezvous_server SOCKET CALLERS\n");
        return 2;
    }
    long served = 0;
    try {
        auto listener = zcio::rendezvous_listener::bind(argv[1]);
        std::vector<zcio::rendezvous> callers;
        for (int i = std::stoi(argv[2]); i > 0; i--) callers.push_back(listener.accept());
        auto r = zcio::rendezvous::recv_any(callers); // the first request of any caller
        for (;; served++) {
            zcio::envelope answer(r.msg.label(), {r.msg.word(0) + r.msg.word(1)});
            r = callers[r.index].reply_and_recv(answer, callers); // answer it, take the next
        }
    } catch (const zcio::error &e) { // disconnected: every caller hung up
        if (e.kind() != zcio::error_kind::disconnected) {
            std::fprintf(stderr, "rendezvous_server: %s\n", e.what());
            return 1;
        }
    }
    std::printf("rendezvous_server: %ld requests, then every caller hung up\n", served + 1);
}
