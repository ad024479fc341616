// tmi_test_host: runs rulka's TMInterface plugin (rulka_link.as) outside the game.
//
// It embeds the AngelScript engine, registers a stub of the TMInterface 2 plugin API that the
// plugin uses (callbacks Main/Render/OnRunStep/OnCheckpointCountChanged/OnGameStateChanged,
// SimulationManager, SimulationState, Net::Socket over real POSIX TCP sockets,
// Graphics::CaptureScreenshot, console variables, commands and CommandList), drives a toy car on a
// straight line (+z) and calls the plugin's callbacks like the game would. The Python client then
// talks to the *real plugin code* over TCP on 127.0.0.1.
//
// Usage: tmi_test_host --plugin rulka_link.as --config "set custom_port 8478"
//                      [--checkpoints 20,40] [--max-seconds 60] [--startup-ms 100] [--countdown-ms 300]
// Prints "LISTENING <port>" on stdout once the plugin listens; "TERMINATED ..." on exit.
//
// State blobs use the byte offsets of environments/trackmania/tmi/state.py (the game's layout).

#include <angelscript.h>
#include <angelscript/scriptarray.h>
#include <angelscript/scriptstdstring.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#ifdef AS_USE_NAMESPACE  // Debian's libangelscript is built with its symbols in this namespace
using namespace AngelScript;
#endif

namespace {

asIScriptEngine* g_engine = nullptr;
const auto g_t0 = std::chrono::steady_clock::now();

unsigned NowMs() {
    return static_cast<unsigned>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - g_t0).count());
}

void HostLog(const std::string& msg) { std::fprintf(stderr, "[host] %s\n", msg.c_str()); }
void ScriptLog(const std::string& msg) { std::fprintf(stderr, "[plugin] %s\n", msg.c_str()); }

CScriptArray* NewByteArray(size_t n) {
    asITypeInfo* ti = g_engine->GetTypeInfoByDecl("array<uint8>");
    return CScriptArray::Create(ti, static_cast<asUINT>(n));
}

// ------------------------------------------------------------------ Net::Socket
class Socket {
public:
    int fd = -1;
    bool broken = false;
    std::string remote_ip;
    int refs = 1;

    void AddRef() { ++refs; }
    void Release() {
        if (--refs == 0) delete this;
    }
    ~Socket() {
        if (fd >= 0) close(fd);
    }

    bool Listen(const std::string& host, uint16_t port) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) return false;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port);
        if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return false;
        if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 4) != 0) {
            close(fd);
            fd = -1;
            return false;
        }
        std::printf("LISTENING %u\n", static_cast<unsigned>(port));
        std::fflush(stdout);
        return true;
    }

    Socket* Accept(unsigned timeout_ms) {
        if (fd < 0) return nullptr;
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, static_cast<int>(timeout_ms)) <= 0) return nullptr;
        sockaddr_in addr{};
        socklen_t len = sizeof(addr);
        int cfd = accept(fd, reinterpret_cast<sockaddr*>(&addr), &len);
        if (cfd < 0) return nullptr;
        int one = 1;
        setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        auto* s = new Socket();
        s->fd = cfd;
        char buf[INET_ADDRSTRLEN] = {0};
        inet_ntop(AF_INET, &addr.sin_addr, buf, sizeof(buf));
        s->remote_ip = buf;
        return s;
    }

    // Bytes ready to read; waits up to 1 ms when none (the plugin polls this in a loop).
    unsigned Available() {
        if (fd < 0 || broken) return 0;
        int n = 0;
        ioctl(fd, FIONREAD, &n);
        if (n > 0) return static_cast<unsigned>(n);
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 1) > 0) {
            ioctl(fd, FIONREAD, &n);
            if (n == 0) broken = true;  // readable with nothing to read: the peer closed
        }
        return n > 0 ? static_cast<unsigned>(n) : 0;
    }

    // Blocking exact read (5 s at most); on failure the socket is marked broken and zeros returned.
    bool ReadExact(void* out, size_t n) {
        auto* p = static_cast<char*>(out);
        std::memset(out, 0, n);
        size_t got = 0;
        while (got < n && !broken) {
            pollfd pf{fd, POLLIN, 0};
            if (poll(&pf, 1, 5000) <= 0) {
                broken = true;
                break;
            }
            ssize_t r = recv(fd, p + got, n - got, 0);
            if (r <= 0) {
                broken = true;
                break;
            }
            got += static_cast<size_t>(r);
        }
        return got == n;
    }

    void WriteRaw(const void* data, size_t n) {
        const auto* p = static_cast<const char*>(data);
        size_t sent = 0;
        while (sent < n && !broken) {
            ssize_t r = send(fd, p + sent, n - sent, MSG_NOSIGNAL);
            if (r <= 0) {
                broken = true;
                break;
            }
            sent += static_cast<size_t>(r);
        }
    }

    int ReadInt32() { int32_t v; ReadExact(&v, 4); return v; }
    unsigned ReadUint32() { uint32_t v; ReadExact(&v, 4); return v; }
    float ReadFloat() { float v; ReadExact(&v, 4); return v; }
    uint8_t ReadUint8() { uint8_t v; ReadExact(&v, 1); return v; }
    CScriptArray* ReadBytes(unsigned n) {
        CScriptArray* a = NewByteArray(n);
        if (n > 0) ReadExact(a->At(0), n);
        return a;
    }
    std::string ReadString(unsigned n) {
        std::string s(n, '\0');
        if (n > 0) ReadExact(&s[0], n);
        return s;
    }
    bool WriteInt(int v) { WriteRaw(&v, 4); return !broken; }
    bool WriteBytes(const CScriptArray& a) {
        if (a.GetSize() > 0) WriteRaw(a.At(0), a.GetSize());
        return !broken;
    }
    std::string RemoteIP() const { return remote_ip; }
};

Socket* SocketFactory() { return new Socket(); }

// ------------------------------------------------------------------ simulation state blob
// Offsets: see environments/trackmania/tmi/state.py.
constexpr size_t OFF_TIMERS = 12, OFF_ROTATION = 688, OFF_POSITION = 724, OFF_LINEAR_SPEED = 736,
                 OFF_ANGULAR_SPEED = 760, OFF_GEARBOX_STATE = 2388, OFF_ACTUAL_RPM = 3112, OFF_GEAR = 3128,
                 OFF_IS_FREEWHEELING = 3196, OFF_WHEELS = 3816, WHEEL_SIZE = 764, OFF_RACE_TIME = 7892,
                 OFF_CUR_CP_COUNT = 8024, OFF_RACE_FINISHED = 8032, OFF_CP_DATA = 8344;

template <typename T>
void Put(std::vector<uint8_t>& b, size_t off, T v) { std::memcpy(&b[off], &v, sizeof(T)); }
template <typename T>
T Get(const std::vector<uint8_t>& b, size_t off) {
    T v{};
    if (off + sizeof(T) <= b.size()) std::memcpy(&v, &b[off], sizeof(T));
    return v;
}

class SimulationState {
public:
    std::vector<uint8_t> data;
    int refs = 1;
    void AddRef() { ++refs; }
    void Release() {
        if (--refs == 0) delete this;
    }
    CScriptArray* ToArray() const {
        CScriptArray* a = NewByteArray(data.size());
        if (!data.empty()) std::memcpy(a->At(0), data.data(), data.size());
        return a;
    }
};

SimulationState* StateFactory() { return new SimulationState(); }
SimulationState* StateFactoryFromArray(const CScriptArray& a) {
    auto* s = new SimulationState();
    s->data.resize(a.GetSize());
    if (a.GetSize() > 0) std::memcpy(s->data.data(), a.At(0), a.GetSize());
    return s;
}

// ------------------------------------------------------------------ the toy game
enum GameState { GS_STARTUP = 0, GS_MENUS = 1, GS_RACE = 2 };
enum InputType { IT_LEFT = 0, IT_RIGHT = 1, IT_UP = 2, IT_DOWN = 3 };

struct PlayerInfo {
    bool race_finished = false;
};

struct Game {
    GameState state = GS_STARTUP;
    bool in_race = false;
    int race_time = 0;  // ms
    int tick_time = 0;  // ms, keeps running after the finish
    double x = 0, z = 0, v = 0;  // metres, m/s along +z
    bool keys[4] = {false, false, false, false};
    float speed = 1.0f;
    bool finished = false;
    bool prevent_finish = false;
    std::vector<double> checkpoints = {20.0, 40.0};  // distances; the last is the finish
    std::vector<int> cp_times;  // time per passed checkpoint
    size_t next_cp = 0;  // index of the next checkpoint to trigger (stays past a prevented finish)
    int countdown_ms = 300;
    std::string map;
    PlayerInfo player;

    void ResetCar() {
        race_time = -countdown_ms;
        tick_time = race_time;
        x = z = v = 0;
        finished = false;
        player.race_finished = false;
        cp_times.clear();
        next_cp = 0;
    }

    std::vector<uint8_t> Encode() const {
        const int n = static_cast<int>(checkpoints.size());
        std::vector<uint8_t> b(OFF_CP_DATA + 12 + 4 * n + 8 * n, 0);
        Put<uint32_t>(b, 0, 1);
        Put<uint32_t>(b, 4, 1);
        Put<uint32_t>(b, 8, 0xFF);
        Put<int32_t>(b, OFF_TIMERS + 4, race_time);
        const float rot[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
        std::memcpy(&b[OFF_ROTATION], rot, sizeof(rot));
        const float pos[3] = {static_cast<float>(x), 0.0f, static_cast<float>(z)};
        std::memcpy(&b[OFF_POSITION], pos, sizeof(pos));
        const float vel[3] = {0.0f, 0.0f, static_cast<float>(v)};
        std::memcpy(&b[OFF_LINEAR_SPEED], vel, sizeof(vel));
        const float ang[3] = {0, 0, 0};
        std::memcpy(&b[OFF_ANGULAR_SPEED], ang, sizeof(ang));
        const int gear = v < 0.5 ? 1 : std::min(5, 1 + static_cast<int>(v / 12.0));
        Put<int32_t>(b, OFF_GEARBOX_STATE, 0);
        Put<float>(b, OFF_ACTUAL_RPM, static_cast<float>(1000.0 + 250.0 * std::fmod(v, 12.0)));
        Put<int32_t>(b, OFF_GEAR, gear);
        Put<int32_t>(b, OFF_IS_FREEWHEELING, keys[IT_UP] ? 0 : 1);
        for (int i = 0; i < 4; ++i) {
            const size_t w = OFF_WHEELS + WHEEL_SIZE * i;
            Put<int32_t>(b, w + 4, i < 2 ? 1 : 0);
            Put<float>(b, w + 180, 0.01f);
            Put<int32_t>(b, w + 292, 1);
            Put<int32_t>(b, w + 296, 16);  // Asphalt
            Put<int32_t>(b, w + 300, 0);
        }
        Put<int32_t>(b, OFF_RACE_TIME, race_time);
        Put<int32_t>(b, OFF_CUR_CP_COUNT, static_cast<int32_t>(cp_times.size()));
        Put<int32_t>(b, OFF_RACE_FINISHED, player.race_finished ? 1 : 0);
        size_t off = OFF_CP_DATA;
        Put<int32_t>(b, off, 0);
        Put<int32_t>(b, off + 4, n);
        off += 8;
        for (int i = 0; i < n; ++i, off += 4) Put<int32_t>(b, off, i < static_cast<int>(cp_times.size()) ? 1 : 0);
        Put<int32_t>(b, off, n);
        off += 4;
        for (int i = 0; i < n; ++i, off += 8) {
            Put<int32_t>(b, off, i < static_cast<int>(cp_times.size()) ? cp_times[i] : -1);
            Put<int32_t>(b, off + 4, 0);
        }
        return b;
    }

    void Restore(const std::vector<uint8_t>& b) {
        race_time = Get<int32_t>(b, OFF_RACE_TIME);
        tick_time = race_time;
        x = Get<float>(b, OFF_POSITION);
        z = Get<float>(b, OFF_POSITION + 8);
        v = Get<float>(b, OFF_LINEAR_SPEED + 8);
        finished = false;
        player.race_finished = false;
        cp_times.clear();
        const int n_states = Get<int32_t>(b, OFF_CP_DATA + 4);
        if (n_states >= 0 && n_states < 10000) {
            const size_t off = OFF_CP_DATA + 8 + 4 * static_cast<size_t>(n_states);
            const int n_times = Get<int32_t>(b, off);
            for (int i = 0; i >= 0 && i < n_times && i < 10000; ++i) {
                const int t = Get<int32_t>(b, off + 4 + 8 * static_cast<size_t>(i));
                if (t < 0) break;
                cp_times.push_back(t);
            }
        }
        next_cp = cp_times.size();
    }

    // One 10 ms physics tick with the held inputs.
    void Physics() {
        if (race_time >= 0) {
            const double dt = 0.01;
            double a = -0.5 * v * 0.02;  // drag
            if (keys[IT_UP]) a += 12.0;
            if (keys[IT_DOWN]) a -= v > 0 ? 20.0 : 0.0;
            v = std::max(0.0, v + a * dt);
            z += v * dt;
            if (keys[IT_LEFT]) x += 0.05 * v * dt;
            if (keys[IT_RIGHT]) x -= 0.05 * v * dt;
        }
        if (!finished) race_time += 10;
        tick_time += 10;
    }
} g_game;

// ------------------------------------------------------------------ SimulationManager
class SimulationManager {
public:
    bool InRace() const { return g_game.in_race; }
    int RaceTime() const { return g_game.race_time; }
    int TickTime() const { return g_game.tick_time; }
    PlayerInfo* GetPlayerInfo() { return &g_game.player; }
    void SetSpeed(float s) { g_game.speed = s < 0 ? 0 : s; }
    void GiveUp() { g_game.ResetCar(); }
    void PreventSimulationFinish() { g_game.prevent_finish = true; }
    SimulationState* SaveState() {
        auto* s = new SimulationState();
        s->data = g_game.Encode();
        return s;
    }
    void RewindToState(const SimulationState& s, bool /*resetCamera*/) { g_game.Restore(s.data); }
    void ResetCamera() {}
    void SetInputState(int type, unsigned value) {
        if (type >= 0 && type < 4) g_game.keys[type] = value != 0;
    }
} g_sim;

SimulationManager* GetSimulationManager() { return &g_sim; }

// ------------------------------------------------------------------ console: variables, commands
std::map<std::string, std::string> g_variables;  // registered by plugins
std::map<std::string, asIScriptFunction*> g_custom_commands;
std::deque<std::string> g_command_queue;
bool g_interface_visible = true;

void RegisterVariableDouble(const std::string& name, double v) {
    if (!g_variables.count(name)) g_variables[name] = std::to_string(v);
}
void RegisterVariableBool(const std::string& name, bool v) {
    if (!g_variables.count(name)) g_variables[name] = v ? "true" : "false";
}
void RegisterVariableString(const std::string& name, const std::string& v) {
    if (!g_variables.count(name)) g_variables[name] = v;
}
double GetVariableDouble(const std::string& name) {
    auto it = g_variables.find(name);
    return it == g_variables.end() ? 0.0 : std::atof(it->second.c_str());
}
void RegisterCustomCommand(const std::string& name, const std::string& /*description*/, asIScriptFunction* cb) {
    if (g_custom_commands.count(name)) g_custom_commands[name]->Release();
    g_custom_commands[name] = cb;  // the handle passed in is ours to release
}
void ExecuteCommand(const std::string& cmd) { g_command_queue.push_back(cmd); }
void ToggleRaceInterface(bool visible) { g_interface_visible = visible; }
int GetCurrentGameState() { return g_game.state; }

class CommandList {
public:
    std::string content;
    int refs = 1;
    void AddRef() { ++refs; }
    void Release() {
        if (--refs == 0) delete this;
    }
    bool Process() {
        std::istringstream in(content);
        std::string line;
        while (std::getline(in, line)) {
            if (!line.empty()) g_command_queue.push_back(line);
        }
        return true;
    }
};
CommandList* CommandListFactory() { return new CommandList(); }

class PluginInfo {
public:
    std::string author, name, description, version;
    int refs = 1;
    void AddRef() { ++refs; }
    void Release() {
        if (--refs == 0) delete this;
    }
};
PluginInfo* PluginInfoFactory() { return new PluginInfo(); }

struct Vec2 {
    float x, y;
};
void Vec2Default(Vec2* self) { self->x = self->y = 0; }
void Vec2Init(float x, float y, Vec2* self) { self->x = x; self->y = y; }

// Screenshot of the toy world: BGRA, top row first; texture scrolls with the car.
CScriptArray* CaptureScreenshot(Vec2& size) {
    const int w = static_cast<int>(size.x), h = static_cast<int>(size.y);
    CScriptArray* a = NewByteArray(static_cast<size_t>(std::max(0, w * h * 4)));
    auto* p = static_cast<uint8_t*>(w * h > 0 ? a->At(0) : nullptr);
    const int shift = static_cast<int>(g_game.z * 8.0);
    for (int row = 0; row < h; ++row) {
        for (int col = 0; col < w; ++col) {
            uint8_t* px = p + 4 * (row * w + col);
            px[0] = static_cast<uint8_t>((row + shift) & 0xFF);
            px[1] = static_cast<uint8_t>((col * 2) & 0xFF);
            px[2] = static_cast<uint8_t>(static_cast<int>(g_game.v * 4) & 0xFF);
            px[3] = 255;
        }
    }
    return a;
}

unsigned StringGetLength(const std::string& s) { return static_cast<unsigned>(s.size()); }

// ------------------------------------------------------------------ engine setup
void MessageCallback(const asSMessageInfo* msg, void*) {
    const char* type = msg->type == asMSGTYPE_ERROR ? "ERROR" : msg->type == asMSGTYPE_WARNING ? "WARN" : "INFO";
    std::fprintf(stderr, "[angelscript] %s (%d, %d) %s: %s\n", msg->section, msg->row, msg->col, type, msg->message);
}

void Check(int r, const char* what) {
    if (r < 0) {
        std::fprintf(stderr, "[host] registration failed (%d): %s\n", r, what);
        std::exit(3);
    }
}

void RegisterApi(asIScriptEngine* e) {
    RegisterStdString(e);
    RegisterScriptArray(e, true);
    // TMInterface spells lengths with a capital L.
    Check(e->RegisterObjectMethod("array<T>", "uint get_Length() const property", asMETHOD(CScriptArray, GetSize),
                                  asCALL_THISCALL), "array.Length");
    Check(e->RegisterObjectMethod("string", "uint get_Length() const property", asFUNCTION(StringGetLength),
                                  asCALL_CDECL_OBJLAST), "string.Length");

    Check(e->RegisterGlobalFunction("void log(const string &in)", asFUNCTION(ScriptLog), asCALL_CDECL), "log");
    Check(e->RegisterGlobalFunction("void print(const string &in)", asFUNCTION(ScriptLog), asCALL_CDECL), "print");

    Check(e->RegisterEnum("InputType"), "InputType");
    e->RegisterEnumValue("InputType", "Left", IT_LEFT);
    e->RegisterEnumValue("InputType", "Right", IT_RIGHT);
    e->RegisterEnumValue("InputType", "Up", IT_UP);
    e->RegisterEnumValue("InputType", "Down", IT_DOWN);

    e->SetDefaultNamespace("TM");
    Check(e->RegisterEnum("GameState"), "TM::GameState");
    e->RegisterEnumValue("GameState", "StartUp", GS_STARTUP);
    e->RegisterEnumValue("GameState", "Menus", GS_MENUS);
    e->RegisterEnumValue("GameState", "LocalRace", GS_RACE);
    e->SetDefaultNamespace("");

    e->SetDefaultNamespace("Time");
    Check(e->RegisterGlobalFunction("uint get_Now() property", asFUNCTION(NowMs), asCALL_CDECL), "Time::Now");
    e->SetDefaultNamespace("");

    Check(e->RegisterObjectType("vec2", sizeof(Vec2), asOBJ_VALUE | asOBJ_POD | asOBJ_APP_CLASS | asOBJ_APP_CLASS_ALLFLOATS), "vec2");
    e->RegisterObjectBehaviour("vec2", asBEHAVE_CONSTRUCT, "void f()", asFUNCTION(Vec2Default), asCALL_CDECL_OBJLAST);
    e->RegisterObjectBehaviour("vec2", asBEHAVE_CONSTRUCT, "void f(float, float)", asFUNCTION(Vec2Init),
                               asCALL_CDECL_OBJLAST);
    e->RegisterObjectProperty("vec2", "float x", asOFFSET(Vec2, x));
    e->RegisterObjectProperty("vec2", "float y", asOFFSET(Vec2, y));

    e->SetDefaultNamespace("Graphics");
    Check(e->RegisterGlobalFunction("array<uint8>@ CaptureScreenshot(vec2 &inout)", asFUNCTION(CaptureScreenshot),
                                    asCALL_CDECL), "CaptureScreenshot");
    e->SetDefaultNamespace("");

    e->SetDefaultNamespace("Net");
    Check(e->RegisterObjectType("Socket", 0, asOBJ_REF), "Net::Socket");
    e->RegisterObjectBehaviour("Socket", asBEHAVE_FACTORY, "Socket@ f()", asFUNCTION(SocketFactory), asCALL_CDECL);
    e->RegisterObjectBehaviour("Socket", asBEHAVE_ADDREF, "void f()", asMETHOD(Socket, AddRef), asCALL_THISCALL);
    e->RegisterObjectBehaviour("Socket", asBEHAVE_RELEASE, "void f()", asMETHOD(Socket, Release), asCALL_THISCALL);
    e->RegisterObjectMethod("Socket", "bool Listen(const string &in, uint16)", asMETHOD(Socket, Listen), asCALL_THISCALL);
    e->RegisterObjectMethod("Socket", "Socket@ Accept(uint)", asMETHOD(Socket, Accept), asCALL_THISCALL);
    e->RegisterObjectMethod("Socket", "uint get_Available() property", asMETHOD(Socket, Available), asCALL_THISCALL);
    e->RegisterObjectMethod("Socket", "string get_RemoteIP() const property", asMETHOD(Socket, RemoteIP), asCALL_THISCALL);
    e->RegisterObjectMethod("Socket", "int ReadInt32()", asMETHOD(Socket, ReadInt32), asCALL_THISCALL);
    e->RegisterObjectMethod("Socket", "uint ReadUint32()", asMETHOD(Socket, ReadUint32), asCALL_THISCALL);
    e->RegisterObjectMethod("Socket", "float ReadFloat()", asMETHOD(Socket, ReadFloat), asCALL_THISCALL);
    e->RegisterObjectMethod("Socket", "uint8 ReadUint8()", asMETHOD(Socket, ReadUint8), asCALL_THISCALL);
    e->RegisterObjectMethod("Socket", "array<uint8>@ ReadBytes(uint)", asMETHOD(Socket, ReadBytes), asCALL_THISCALL);
    e->RegisterObjectMethod("Socket", "string ReadString(uint)", asMETHOD(Socket, ReadString), asCALL_THISCALL);
    e->RegisterObjectMethod("Socket", "bool Write(int)", asMETHOD(Socket, WriteInt), asCALL_THISCALL);
    e->RegisterObjectMethod("Socket", "bool Write(const array<uint8> &in)", asMETHOD(Socket, WriteBytes),
                            asCALL_THISCALL);
    e->SetDefaultNamespace("");

    Check(e->RegisterObjectType("SimulationState", 0, asOBJ_REF), "SimulationState");
    e->RegisterObjectBehaviour("SimulationState", asBEHAVE_FACTORY, "SimulationState@ f()", asFUNCTION(StateFactory),
                               asCALL_CDECL);
    e->RegisterObjectBehaviour("SimulationState", asBEHAVE_FACTORY, "SimulationState@ f(const array<uint8> &in)",
                               asFUNCTION(StateFactoryFromArray), asCALL_CDECL);
    e->RegisterObjectBehaviour("SimulationState", asBEHAVE_ADDREF, "void f()", asMETHOD(SimulationState, AddRef),
                               asCALL_THISCALL);
    e->RegisterObjectBehaviour("SimulationState", asBEHAVE_RELEASE, "void f()", asMETHOD(SimulationState, Release),
                               asCALL_THISCALL);
    e->RegisterObjectMethod("SimulationState", "array<uint8>@ ToArray() const", asMETHOD(SimulationState, ToArray),
                            asCALL_THISCALL);

    Check(e->RegisterObjectType("TmPlayerInfo", 0, asOBJ_REF | asOBJ_NOCOUNT), "PlayerInfo");
    e->RegisterObjectProperty("TmPlayerInfo", "bool RaceFinished", asOFFSET(PlayerInfo, race_finished));

    Check(e->RegisterObjectType("SimulationManager", 0, asOBJ_REF | asOBJ_NOCOUNT), "SimulationManager");
    e->RegisterObjectMethod("SimulationManager", "bool get_InRace() const property",
                            asMETHOD(SimulationManager, InRace), asCALL_THISCALL);
    e->RegisterObjectMethod("SimulationManager", "int get_RaceTime() const property",
                            asMETHOD(SimulationManager, RaceTime), asCALL_THISCALL);
    e->RegisterObjectMethod("SimulationManager", "int get_TickTime() const property",
                            asMETHOD(SimulationManager, TickTime), asCALL_THISCALL);
    e->RegisterObjectMethod("SimulationManager", "TmPlayerInfo@ get_PlayerInfo() property",
                            asMETHOD(SimulationManager, GetPlayerInfo), asCALL_THISCALL);
    e->RegisterObjectMethod("SimulationManager", "void SetSpeed(float)", asMETHOD(SimulationManager, SetSpeed),
                            asCALL_THISCALL);
    e->RegisterObjectMethod("SimulationManager", "void GiveUp()", asMETHOD(SimulationManager, GiveUp), asCALL_THISCALL);
    e->RegisterObjectMethod("SimulationManager", "void PreventSimulationFinish()",
                            asMETHOD(SimulationManager, PreventSimulationFinish), asCALL_THISCALL);
    e->RegisterObjectMethod("SimulationManager", "SimulationState@ SaveState()", asMETHOD(SimulationManager, SaveState),
                            asCALL_THISCALL);
    e->RegisterObjectMethod("SimulationManager", "void RewindToState(const SimulationState &in, bool resetCamera = true)",
                            asMETHOD(SimulationManager, RewindToState), asCALL_THISCALL);
    e->RegisterObjectMethod("SimulationManager", "void ResetCamera()", asMETHOD(SimulationManager, ResetCamera),
                            asCALL_THISCALL);
    e->RegisterObjectMethod("SimulationManager", "void SetInputState(InputType, uint)",
                            asMETHOD(SimulationManager, SetInputState), asCALL_THISCALL);
    Check(e->RegisterGlobalFunction("SimulationManager@ GetSimulationManager()", asFUNCTION(GetSimulationManager),
                                    asCALL_CDECL), "GetSimulationManager");

    Check(e->RegisterFuncdef("void CommandCallback(int, int, const string &in, const array<string> &in)"), "funcdef");
    e->RegisterGlobalFunction("void RegisterVariable(const string &in, double)", asFUNCTION(RegisterVariableDouble),
                              asCALL_CDECL);
    e->RegisterGlobalFunction("void RegisterVariable(const string &in, bool)", asFUNCTION(RegisterVariableBool),
                              asCALL_CDECL);
    e->RegisterGlobalFunction("void RegisterVariable(const string &in, const string &in)",
                              asFUNCTION(RegisterVariableString), asCALL_CDECL);
    e->RegisterGlobalFunction("double GetVariableDouble(const string &in)", asFUNCTION(GetVariableDouble), asCALL_CDECL);
    e->RegisterGlobalFunction("void RegisterCustomCommand(const string &in, const string &in, CommandCallback@)",
                              asFUNCTION(RegisterCustomCommand), asCALL_CDECL);
    e->RegisterGlobalFunction("void ExecuteCommand(const string &in)", asFUNCTION(ExecuteCommand), asCALL_CDECL);
    e->RegisterGlobalFunction("void ToggleRaceInterface(bool)", asFUNCTION(ToggleRaceInterface), asCALL_CDECL);
    e->RegisterGlobalFunction("TM::GameState GetCurrentGameState()", asFUNCTION(GetCurrentGameState), asCALL_CDECL);

    Check(e->RegisterObjectType("CommandList", 0, asOBJ_REF), "CommandList");
    e->RegisterObjectBehaviour("CommandList", asBEHAVE_FACTORY, "CommandList@ f()", asFUNCTION(CommandListFactory),
                               asCALL_CDECL);
    e->RegisterObjectBehaviour("CommandList", asBEHAVE_ADDREF, "void f()", asMETHOD(CommandList, AddRef), asCALL_THISCALL);
    e->RegisterObjectBehaviour("CommandList", asBEHAVE_RELEASE, "void f()", asMETHOD(CommandList, Release),
                               asCALL_THISCALL);
    e->RegisterObjectProperty("CommandList", "string Content", asOFFSET(CommandList, content));
    e->RegisterObjectMethod("CommandList", "bool Process()", asMETHOD(CommandList, Process), asCALL_THISCALL);

    Check(e->RegisterObjectType("PluginInfo", 0, asOBJ_REF), "PluginInfo");
    e->RegisterObjectBehaviour("PluginInfo", asBEHAVE_FACTORY, "PluginInfo@ f()", asFUNCTION(PluginInfoFactory),
                               asCALL_CDECL);
    e->RegisterObjectBehaviour("PluginInfo", asBEHAVE_ADDREF, "void f()", asMETHOD(PluginInfo, AddRef), asCALL_THISCALL);
    e->RegisterObjectBehaviour("PluginInfo", asBEHAVE_RELEASE, "void f()", asMETHOD(PluginInfo, Release),
                               asCALL_THISCALL);
    e->RegisterObjectProperty("PluginInfo", "string Author", asOFFSET(PluginInfo, author));
    e->RegisterObjectProperty("PluginInfo", "string Name", asOFFSET(PluginInfo, name));
    e->RegisterObjectProperty("PluginInfo", "string Description", asOFFSET(PluginInfo, description));
    e->RegisterObjectProperty("PluginInfo", "string Version", asOFFSET(PluginInfo, version));
}

// ------------------------------------------------------------------ calling the plugin
asIScriptContext* g_ctx = nullptr;

bool Prepare(asIScriptFunction* f) {
    if (f == nullptr) return false;
    if (g_ctx->Prepare(f) < 0) {
        HostLog(std::string("cannot prepare ") + f->GetDeclaration());
        std::exit(4);
    }
    return true;
}

void Run(asIScriptFunction* f) {
    const int r = g_ctx->Execute();
    if (r != asEXECUTION_FINISHED) {
        std::string why = r == asEXECUTION_EXCEPTION ? g_ctx->GetExceptionString() : "did not finish";
        HostLog(std::string("script error in ") + f->GetDeclaration() + ": " + why);
        std::printf("TERMINATED script-error\n");
        std::fflush(stdout);
        std::exit(5);
    }
}

struct Callbacks {
    asIScriptFunction *main = nullptr, *render = nullptr, *run_step = nullptr, *cp_changed = nullptr,
                      *lap_changed = nullptr, *state_changed = nullptr, *info = nullptr, *disabled = nullptr;
} g_cb;

void CallNoArg(asIScriptFunction* f) {
    if (!Prepare(f)) return;
    Run(f);
}
void CallRunStep() {
    if (!Prepare(g_cb.run_step)) return;
    g_ctx->SetArgObject(0, &g_sim);
    Run(g_cb.run_step);
}
void CallCountChanged(asIScriptFunction* f, int current, int target) {
    if (!Prepare(f)) return;
    g_ctx->SetArgObject(0, &g_sim);
    g_ctx->SetArgDWord(1, static_cast<asDWORD>(current));
    g_ctx->SetArgDWord(2, static_cast<asDWORD>(target));
    Run(f);
}
void SetGameState(GameState s) {
    g_game.state = s;
    if (!Prepare(g_cb.state_changed)) return;
    g_ctx->SetArgDWord(0, static_cast<asDWORD>(s));
    Run(g_cb.state_changed);
}

std::vector<std::string> Split(const std::string& s) {
    std::istringstream in(s);
    std::vector<std::string> out;
    std::string tok;
    while (in >> tok) out.push_back(tok);
    return out;
}

void RunCommand(const std::string& line) {
    auto args = Split(line);
    if (args.empty()) return;
    const std::string& cmd = args[0];
    if (cmd == "set" && args.size() >= 3) {
        if (g_variables.count(args[1])) {
            g_variables[args[1]] = args[2];
        } else if (args[1] == "custom_port") {
            HostLog("Unknown variable: custom_port");  // what the game prints without the plugin
        }  // other builtin variables (countdown_speed, autologin...) are accepted silently
    } else if (cmd == "map" && args.size() >= 2) {
        std::string path = line.substr(line.find("map") + 3);
        while (!path.empty() && (path.front() == ' ' || path.front() == '"')) path.erase(path.begin());
        while (!path.empty() && (path.back() == ' ' || path.back() == '"')) path.pop_back();
        g_game.map = path;
        g_game.in_race = true;
        g_game.ResetCar();
        HostLog("map loaded: " + path);
        SetGameState(GS_RACE);
    } else if (g_custom_commands.count(cmd)) {
        asIScriptFunction* f = g_custom_commands[cmd];
        CScriptArray* argv = CScriptArray::Create(g_engine->GetTypeInfoByDecl("array<string>"), asUINT(0));
        std::string command_line = line;
        Prepare(f);
        g_ctx->SetArgDWord(0, static_cast<asDWORD>(-1));
        g_ctx->SetArgDWord(1, static_cast<asDWORD>(-1));
        g_ctx->SetArgObject(2, &command_line);
        g_ctx->SetArgObject(3, argv);
        Run(f);
        argv->Release();
    }  // cam, toggle_console... have no effect here
}

void ProcessCommands() {
    while (!g_command_queue.empty()) {
        std::string c = g_command_queue.front();
        g_command_queue.pop_front();
        RunCommand(c);
    }
}

// One physics tick: RUN_STEP callback, physics, checkpoint callbacks.
void Tick() {
    CallRunStep();
    if (!g_game.in_race) return;
    g_game.Physics();
    const size_t next = g_game.next_cp;
    if (!g_game.finished && next < g_game.checkpoints.size() && g_game.z >= g_game.checkpoints[next]) {
        g_game.next_cp = next + 1;
        g_game.cp_times.push_back(g_game.race_time);
        const int current = static_cast<int>(g_game.cp_times.size());
        const int target = static_cast<int>(g_game.checkpoints.size());
        g_game.prevent_finish = false;
        CallCountChanged(g_cb.cp_changed, current, target);
        if (current == target) {
            if (g_game.prevent_finish) {
                g_game.cp_times.pop_back();  // as in the game: the finish does not count, the race goes on
            } else {
                g_game.finished = true;
                g_game.player.race_finished = true;
            }
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::string plugin_path, config;
    double max_seconds = 60.0;
    int startup_ms = 100;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--plugin") plugin_path = v;
        else if (k == "--config") config = v;
        else if (k == "--max-seconds") max_seconds = std::atof(v.c_str());
        else if (k == "--startup-ms") startup_ms = std::atoi(v.c_str());
        else if (k == "--countdown-ms") g_game.countdown_ms = std::atoi(v.c_str());
        else if (k == "--checkpoints") {
            g_game.checkpoints.clear();
            std::stringstream ss(v);
            std::string item;
            while (std::getline(ss, item, ',')) g_game.checkpoints.push_back(std::atof(item.c_str()));
        } else {
            std::fprintf(stderr, "unknown option %s\n", k.c_str());
            return 2;
        }
    }
    if (plugin_path.empty()) {
        std::fprintf(stderr, "usage: %s --plugin FILE.as [--config \"set custom_port N\"] ...\n", argv[0]);
        return 2;
    }
    std::ifstream file(plugin_path);
    if (!file) {
        std::fprintf(stderr, "cannot read %s\n", plugin_path.c_str());
        return 2;
    }
    std::stringstream source;
    source << file.rdbuf();

    g_engine = asCreateScriptEngine();
    g_engine->SetMessageCallback(asFUNCTION(MessageCallback), nullptr, asCALL_CDECL);
    // TMInterface's documented API passes value types by &inout (CaptureScreenshot(vec2 &inout)).
    g_engine->SetEngineProperty(asEP_ALLOW_UNSAFE_REFERENCES, true);
    RegisterApi(g_engine);
    asIScriptModule* mod = g_engine->GetModule("plugin", asGM_ALWAYS_CREATE);
    mod->AddScriptSection(plugin_path.c_str(), source.str().c_str(), source.str().size());
    if (mod->Build() < 0) {
        std::printf("TERMINATED compile-error\n");
        std::fflush(stdout);
        return 1;
    }
    std::printf("COMPILED\n");
    std::fflush(stdout);
    g_ctx = g_engine->CreateContext();
    g_cb.main = mod->GetFunctionByDecl("void Main()");
    g_cb.render = mod->GetFunctionByDecl("void Render()");
    g_cb.run_step = mod->GetFunctionByDecl("void OnRunStep(SimulationManager@)");
    g_cb.cp_changed = mod->GetFunctionByDecl("void OnCheckpointCountChanged(SimulationManager@, int, int)");
    g_cb.lap_changed = mod->GetFunctionByDecl("void OnLapCountChanged(SimulationManager@, int, int)");
    g_cb.state_changed = mod->GetFunctionByDecl("void OnGameStateChanged(TM::GameState)");
    g_cb.info = mod->GetFunctionByDecl("PluginInfo@ GetPluginInfo()");
    g_cb.disabled = mod->GetFunctionByDecl("void OnDisabled()");
    if (g_cb.info == nullptr || g_cb.main == nullptr) {
        HostLog("the plugin lacks GetPluginInfo() or Main()");
        std::printf("TERMINATED missing-callbacks\n");
        return 1;
    }
    CallNoArg(g_cb.info);  // required by TMInterface, called before Main
    CallNoArg(g_cb.main);
    for (const std::string& c : Split(config).empty() ? std::vector<std::string>{} : std::vector<std::string>{config}) {
        RunCommand(c);  // the launch's /configstring runs before the plugin's queued command lists
    }
    ProcessCommands();

    const double deadline_ms = max_seconds * 1000.0;
    bool startup_done = false;
    while (NowMs() < deadline_ms) {
        if (!startup_done && NowMs() >= static_cast<unsigned>(startup_ms)) {
            startup_done = true;
            SetGameState(GS_MENUS);
        }
        ProcessCommands();
        if (g_game.in_race && g_game.speed > 0) {
            const int ticks = std::max(1, static_cast<int>(std::lround(g_game.speed)));
            for (int i = 0; i < ticks && g_game.speed > 0; ++i) {
                Tick();
                ProcessCommands();
            }
        } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        CallNoArg(g_cb.render);
    }
    CallNoArg(g_cb.disabled);
    for (auto& kv : g_custom_commands) kv.second->Release();
    g_ctx->Release();
    g_engine->ShutDownAndRelease();
    std::printf("TERMINATED timeout\n");
    std::fflush(stdout);
    return 0;
}
