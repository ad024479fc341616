// rulka_link.as: the game side of rulka's link to TrackMania Nations Forever (TMInterface 2.x plugin).
//
// Install: `rulka tmi install` copies this file into Documents/TMInterface/Plugins/.
// Launch the game with /configstring="set custom_port <port>": the plugin listens on
// 127.0.0.1:<port> for one rulka client. The port is read once the launch's command queue has been
// processed (OnQueueProcessed), never earlier: TMInterface restores registered variables from an
// earlier session, so custom_port may hold a stale port before /configstring has set it.
// The accepted socket has NoDelay set: with Nagle's algorithm each reply waits for the client's
// delayed ACK (tens of ms per message on loopback).
// Console command `rulka_focus_window` shows and focuses the game window (rulka sends it once
// after each launch: an instance that was never focused does not run properly under Linux).
//
// Wire protocol (little-endian, no framing; see environments/trackmania/tmi/link/protocol.py):
//   every message = int32 id + a fixed payload for that id.
//   Game -> client sync messages (ids 1-5) block the game until the client echoes the same id;
//   while blocked, the plugin serves client commands (ids 6-23). If no byte arrives for
//   g_timeoutMs (default 2000 ms, set by id 15) the plugin drops the client and listens again.
//
//   1 SC_RUN_STEP_SYNC                 int32 race_time (when race_time % period == 0, or after the finish)
//   2 SC_CHECKPOINT_COUNT_CHANGED_SYNC int32 current, int32 target
//   3 SC_LAP_COUNT_CHANGED_SYNC        int32 current, int32 target
//   4 SC_REQUESTED_FRAME_SYNC          W*H*4 bytes BGRA
//   5 SC_ON_CONNECT_SYNC               nothing
//   6 C_SET_SPEED float32 | 7 C_REWIND_TO_STATE int32 len + bytes | 8 C_REWIND_TO_CURRENT_STATE
//   9 C_GET_SIMULATION_STATE -> int32 len + bytes | 10 C_SET_INPUT_STATE 4 x uint8 (left, right, up, down)
//   11 C_GIVE_UP | 12 C_PREVENT_SIMULATION_FINISH | 13 C_SHUTDOWN | 14 C_EXECUTE_COMMAND int32 len + UTF-8
//   15 C_SET_TIMEOUT uint32 ms | 16 C_RACE_FINISHED -> int32 | 17 C_REQUEST_FRAME int32 W, int32 H
//   18 C_RESET_CAMERA | 19 C_SET_ON_STEP_PERIOD int32 ms | 20 C_UNREQUEST_FRAME
//   21 C_TOGGLE_INTERFACE int32 bool | 22 C_IS_IN_MENUS -> int32 | 23 C_GET_INPUTS -> int32 len + text

enum MessageType {
    SCRunStepSync = 1,
    SCCheckpointCountChangedSync = 2,
    SCLapCountChangedSync = 3,
    SCRequestedFrameSync = 4,
    SCOnConnectSync = 5,
    CSetSpeed = 6,
    CRewindToState = 7,
    CRewindToCurrentState = 8,
    CGetSimulationState = 9,
    CSetInputState = 10,
    CGiveUp = 11,
    CPreventSimulationFinish = 12,
    CShutdown = 13,
    CExecuteCommand = 14,
    CSetTimeout = 15,
    CRaceFinished = 16,
    CRequestFrame = 17,
    CResetCamera = 18,
    CSetOnStepPeriod = 19,
    CUnrequestFrame = 20,
    CToggleInterface = 21,
    CIsInMenus = 22,
    CGetInputs = 23
}

// HandleMessage results that are not message ids.
const int NO_MESSAGE = -1;
const int CLIENT_DROPPED = -2;

const string HOST = "127.0.0.1";
const string PORT_VARIABLE = "custom_port";
const uint DEFAULT_TIMEOUT_MS = 2000;
const int DEFAULT_STEP_PERIOD_MS = 10;
const int MAX_PAYLOAD_BYTES = 1048576;  // state blobs and console commands
const int MAX_FRAME_SIDE = 4096;

Net::Socket@ g_listener = null;
Net::Socket@ g_client = null;
uint g_timeoutMs = DEFAULT_TIMEOUT_MS;
int g_stepPeriodMs = DEFAULT_STEP_PERIOD_MS;
int g_frameW = -1;
int g_frameH = -1;
bool g_onConnectQueued = false;
bool g_warnedNoPort = false;

bool g_screenshotFailed = false;  // logged once per frame request

// ------------------------------------------------------------------ connection
void StartListening()
{
    if (g_listener !is null) {
        return;
    }
    const double port = GetVariableDouble(PORT_VARIABLE);  // set by /configstring (see the header)
    if (port < 1 || port > 65535) {
        if (!g_warnedNoPort) {
            log("rulka_link: custom_port is not set; launch the game with /configstring=\"set custom_port <port>\"");
            g_warnedNoPort = true;
        }
        return;
    }
    Net::Socket@ listener = Net::Socket();
    if (!listener.Listen(HOST, uint16(port))) {
        log("rulka_link: cannot listen on " + HOST + ":" + uint16(port) + " (port in use?)");
        return;
    }
    @g_listener = listener;
    log("rulka_link: listening on " + HOST + ":" + uint16(port));
}

void DropClient(const string &in reason)
{
    if (g_client !is null) {
        log("rulka_link: client dropped: " + reason);
    }
    @g_client = null;
    g_timeoutMs = DEFAULT_TIMEOUT_MS;
    g_stepPeriodMs = DEFAULT_STEP_PERIOD_MS;
    g_frameW = -1;
    g_frameH = -1;
}

void SendOnConnect()
{
    g_client.Write(int(MessageType::SCOnConnectSync));
    WaitForResponse(MessageType::SCOnConnectSync);
}

// Block until the client echoes `type`, serving its commands meanwhile.
// Returns false when the client was dropped (timeout, shutdown, protocol error).
bool WaitForResponse(int type)
{
    auto start = Time::Now;
    while (g_client !is null) {
        const int received = HandleMessage();
        if (received == type) {
            return true;
        }
        if (received == CLIENT_DROPPED) {
            return false;
        }
        if (received == NO_MESSAGE && Time::Now - start > g_timeoutMs) {
            DropClient("no reply within " + g_timeoutMs + " ms");
            return false;
        }
        if (received != NO_MESSAGE) {
            start = Time::Now;  // the client is alive: the timeout counts from its last message
        }
    }
    return false;
}

// ------------------------------------------------------------------ commands
// Reads one message if bytes are available and serves it; returns its id, NO_MESSAGE or CLIENT_DROPPED.
int HandleMessage()
{
    if (g_client is null) {
        return CLIENT_DROPPED;
    }
    if (g_client.Available == 0) {
        return NO_MESSAGE;
    }
    SimulationManager@ simManager = GetSimulationManager();
    const int type = g_client.ReadInt32();
    switch (type) {
        case MessageType::SCRunStepSync:
        case MessageType::SCCheckpointCountChangedSync:
        case MessageType::SCLapCountChangedSync:
        case MessageType::SCRequestedFrameSync:
        case MessageType::SCOnConnectSync:
            break;  // an echo: the caller compares it with what it waits for

        case MessageType::CSetSpeed: {
            const float speed = g_client.ReadFloat();
            simManager.SetSpeed(speed);
            break;
        }

        case MessageType::CRewindToState: {
            const int length = g_client.ReadInt32();
            if (length < 0 || length > MAX_PAYLOAD_BYTES) {
                DropClient("invalid state length " + length);
                return CLIENT_DROPPED;
            }
            const auto stateData = g_client.ReadBytes(length);
            if (simManager.InRace) {
                SimulationState state(stateData);
                simManager.RewindToState(state);
            }
            break;
        }

        case MessageType::CRewindToCurrentState: {
            if (simManager.InRace) {
                simManager.RewindToState(simManager.SaveState());
            }
            break;
        }

        case MessageType::CGetSimulationState: {
            auto@ state = simManager.SaveState();
            const auto@ data = state.ToArray();
            g_client.Write(int(data.Length));
            g_client.Write(data);
            break;
        }

        case MessageType::CSetInputState: {
            array<bool> keys(4);
            for (uint i = 0; i < 4; i++) {
                keys[i] = g_client.ReadUint8() > 0;
            }
            if (simManager.InRace) {
                simManager.SetInputState(InputType::Left, keys[0] ? 1 : 0);
                simManager.SetInputState(InputType::Right, keys[1] ? 1 : 0);
                simManager.SetInputState(InputType::Up, keys[2] ? 1 : 0);
                simManager.SetInputState(InputType::Down, keys[3] ? 1 : 0);
            }
            break;
        }

        case MessageType::CGiveUp: {
            if (simManager.InRace) {
                simManager.GiveUp();
            }
            break;
        }

        case MessageType::CPreventSimulationFinish: {
            if (simManager.InRace) {
                simManager.PreventSimulationFinish();
            }
            break;
        }

        case MessageType::CShutdown: {
            DropClient("client shut down");
            return CLIENT_DROPPED;
        }

        case MessageType::CExecuteCommand: {
            const int length = g_client.ReadInt32();
            if (length < 0 || length > MAX_PAYLOAD_BYTES) {
                DropClient("invalid command length " + length);
                return CLIENT_DROPPED;
            }
            const string command = g_client.ReadString(length);
            ExecuteCommand(command);
            break;
        }

        case MessageType::CSetTimeout: {
            g_timeoutMs = g_client.ReadUint32();
            break;
        }

        case MessageType::CRaceFinished: {
            const bool finished = simManager.PlayerInfo.RaceFinished || simManager.TickTime > simManager.RaceTime;
            g_client.Write(int(finished ? 1 : 0));
            break;
        }

        case MessageType::CRequestFrame: {
            const int w = g_client.ReadInt32();
            const int h = g_client.ReadInt32();
            if (w < 1 || h < 1 || w > MAX_FRAME_SIDE || h > MAX_FRAME_SIDE) {
                DropClient("invalid frame size " + w + "x" + h);
                return CLIENT_DROPPED;
            }
            g_frameW = w;
            g_frameH = h;
            break;
        }

        case MessageType::CResetCamera: {
            simManager.ResetCamera();
            break;
        }

        case MessageType::CSetOnStepPeriod: {
            const int period = g_client.ReadInt32();
            g_stepPeriodMs = period > 0 ? period : DEFAULT_STEP_PERIOD_MS;
            break;
        }

        case MessageType::CUnrequestFrame: {
            g_frameW = -1;
            g_frameH = -1;
            break;
        }

        case MessageType::CToggleInterface: {
            ToggleRaceInterface(g_client.ReadInt32() > 0);
            break;
        }

        case MessageType::CIsInMenus: {
            g_client.Write(int(GetCurrentGameState() == TM::GameState::Menus ? 1 : 0));
            break;
        }

        case MessageType::CGetInputs: {
            // The game's own record of the inputs it applied, as Linesight reads it.
            const string text = simManager.InputEvents.ToCommandsText();
            g_client.Write(int(text.Length));
            if (text.Length > 0) {
                g_client.Write(text);
            }
            break;
        }

        default: {
            // The stream cannot be resynchronised after an unknown id: drop the client.
            DropClient("unknown message id " + type);
            return CLIENT_DROPPED;
        }
    }
    return type;
}

// ------------------------------------------------------------------ TMInterface callbacks
void OnRunStep(SimulationManager@ simManager)
{
    if (g_client is null) {
        return;
    }
    const int raceTime = simManager.RaceTime;
    if (raceTime % g_stepPeriodMs == 0 || simManager.TickTime > simManager.RaceTime) {
        g_client.Write(int(MessageType::SCRunStepSync));
        g_client.Write(raceTime);
        WaitForResponse(MessageType::SCRunStepSync);
    }
}

void OnCheckpointCountChanged(SimulationManager@ simManager, int current, int target)
{
    if (g_client is null) {
        return;
    }
    g_client.Write(int(MessageType::SCCheckpointCountChangedSync));
    g_client.Write(current);
    g_client.Write(target);
    WaitForResponse(MessageType::SCCheckpointCountChangedSync);
}

void OnLapCountChanged(SimulationManager@ simManager, int current, int target)
{
    if (g_client is null) {
        return;
    }
    g_client.Write(int(MessageType::SCLapCountChangedSync));
    g_client.Write(current);
    g_client.Write(target);
    WaitForResponse(MessageType::SCLapCountChangedSync);
}

void OnGameStateChanged(TM::GameState state)
{
    if (state == TM::GameState::Menus && g_onConnectQueued && g_client !is null) {
        g_onConnectQueued = false;
        SendOnConnect();
    }
}

void Render()
{
    if (g_listener is null) {
        return;  // OnQueueProcessed starts it once /configstring has set custom_port
    }
    Net::Socket@ incoming = g_listener.Accept(0);
    if (incoming !is null) {
        if (g_client !is null) {
            log("rulka_link: a new client replaces the previous one");
        }
        DropClient("replaced by a new client");
        incoming.NoDelay = true;
        @g_client = incoming;
        log("rulka_link: client connected from " + g_client.RemoteIP);
        if (GetCurrentGameState() != TM::GameState::StartUp) {
            SendOnConnect();
        } else {
            g_onConnectQueued = true;  // sent from OnGameStateChanged once the menus show
        }
    }
    if (g_client !is null && g_frameW > 0 && g_frameH > 0) {
        const int w = g_frameW;
        const int h = g_frameH;
        vec2 size(w, h);
        const auto@ frame = Graphics::CaptureScreenshot(size);
        if (frame is null || int(frame.Length) != w * h * 4) {
            // A minimised window gives no screenshot: restore it and try again at the next frame (the
            // client expects exactly W*H*4 bytes; it gives up after its own timeout).
            if (!g_screenshotFailed) {
                log("rulka_link: no screenshot (window minimised?): restoring the game window", Severity::Warning);
                g_screenshotFailed = true;
            }
            Graphics::ShowGameWindow();
            return;
        }
        g_screenshotFailed = false;
        g_frameW = -1;  // a request made while we wait for the echo is kept
        g_frameH = -1;
        g_client.Write(int(MessageType::SCRequestedFrameSync));
        g_client.Write(frame);
        WaitForResponse(MessageType::SCRequestedFrameSync);
    }
}

// Runs after the launch's /configstring commands: custom_port then holds the port to listen on.
void OnQueueProcessed(int fromTime, int toTime, const string &in commandLine, const array<string> &in args)
{
    StartListening();
}

void OnFocusWindow(int fromTime, int toTime, const string &in commandLine, const array<string> &in args)
{
    Graphics::ShowGameWindow();
    Graphics::FocusGameWindow();
}

void Main()
{
    RegisterVariable(PORT_VARIABLE, 0);
    RegisterCustomCommand("rulka_link_queue_processed", "Internal: start rulka_link's listener", OnQueueProcessed);
    RegisterCustomCommand("rulka_focus_window", "Show and focus the game window", OnFocusWindow);
    CommandList list;
    list.Content = "rulka_link_queue_processed";
    list.Process();
}

void OnDisabled()
{
    DropClient("plugin disabled");
    @g_listener = null;
}

PluginInfo@ GetPluginInfo()
{
    PluginInfo info;
    info.Author = "rulka";
    info.Name = "rulka_link";
    info.Description = "Lets rulka (reinforcement learning) drive the car over a local TCP socket";
    info.Version = "2.0";
    return info;
}
