"""ik_client as a user runs it: a process asking the real server (beside the simulator)."""

import re
import signal
import subprocess

import pytest

from iknet_core.resources import installed_executable as executable


@pytest.fixture
def server(processes, tmp_path):
    processes.start(executable('omx_sim'), log=tmp_path / 'sim.log')
    processes.start(executable('ik_server'), '--ros-args', '-p', 'device:=cpu')


def run_client(ros_env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(executable('ik_client')), *args, '--timeout', '60'],
        env=ros_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_pitch_target_is_solved_and_moved(server, ros_env):
    result = run_client(ros_env, '--x', '0.2', '--y', '0.05', '--z', '0.1', '--pitch', '0.8',
                        '--move', '--path-time', '0.5')  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'success' in result.stdout
    assert 'joint1=' in result.stdout and 'mm' in result.stdout
    assert 'move: planned' in result.stdout
    assert 'note: --pitch' not in result.stdout  # the OM-X's own orientation
    # Exits cleanly: no executor error from a __del__ after rclpy's shutdown.
    assert 'InvalidHandle' not in result.stderr and 'Traceback' not in result.stderr


def test_unreachable_target_exits_nonzero(server, ros_env):
    result = run_client(ros_env, '--x', '1.0', '--y', '0', '--z', '0.1', '--pitch', '0')
    assert result.returncode == 1
    assert 'FAILED' in result.stdout


def test_bad_arguments_are_refused_before_any_call(ros_env, tmp_path):
    result = run_client(ros_env, '--x', '0.2', '--y', '0', '--z', '0.1', '--qx', '0')
    assert result.returncode == 2
    assert 'give --qx --qy --qz --qw (all four) or --pitch' in result.stderr
    pose = ('--x', '0.2', '--y', '0', '--z', '0.1', '--pitch', '0.5')
    result = run_client(ros_env, *pose, '--solutions', '-1')
    assert result.returncode == 2
    assert '--solutions must be 1 to 4294967295, got -1' in result.stderr
    result = run_client(ros_env, *pose, '--solutions', str(2**32))  # SolveIK's uint32 wraps
    assert result.returncode == 2
    assert '--solutions must be 1 to 4294967295, got 4294967296' in result.stderr
    position = ('--x', '0.2', '--y', '0', '--z', '0.1')
    result = run_client(ros_env, *position, '--move')
    assert result.returncode == 2
    assert '--move needs --pitch or a quaternion' in result.stderr
    result = run_client(ros_env, *pose, '--move', '--solver', 'network')
    assert result.returncode == 2
    assert "--move sends the arm to the server's solver's refined answer" in result.stderr
    result = run_client(ros_env, *pose, '--move', '--path-time', '-1')
    assert result.returncode == 2
    assert '--path-time must be > 0 s, got -1.0' in result.stderr
    # A figure it could not write is refused before the path is solved (or the arm moved).
    (tmp_path / 'file').write_text('')
    line = ('--line', '0.2,0,0.1:0.25,0,0.1')
    for plot, message in (
        (tmp_path / 'file' / 'x.png', 'file is a file, not a folder'),
        (tmp_path, 'is a directory; give a file name'),
        (tmp_path / 'line.txt', 'name a figure file ending in one of'),
        (tmp_path / 'line', 'name a figure file ending in one of'),
    ):
        result = run_client(ros_env, *line, '--plot', str(plot))
        assert result.returncode == 2, result.stderr
        assert f'argument --plot: {plot}' in result.stderr and message in result.stderr


def test_analytic_solver_is_chosen_per_request(server, ros_env):
    result = run_client(ros_env, '--x', '0.2', '--y', '0.0', '--z', '0.1', '--pitch', '0.5',
                        '--solver', 'analytic')  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'success: analytic:' in result.stdout


def test_a_position_alone_is_asked_for_without_an_orientation(server, ros_env):
    result = run_client(ros_env, '--x', '0.2', '--y', '0.05', '--z', '0.1', '--solutions', '2')
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'any orientation' in result.stdout and 'success' in result.stdout
    errors = re.findall(r'position error (\S+) mm', result.stdout)
    assert errors and max(float(error) for error in errors) <= 0.001


def test_without_an_arm_a_path_is_solved_without_waiting_for_joint_states(processes, ros_env):
    """No /joint_states publisher (a server alone, no arm): the first waypoint is solved
    without a seed once discovery shows none, not after --timeout."""
    processes.start(executable('ik_server'), '--ros-args', '-p', 'device:=cpu')
    result = run_client(ros_env, '--line', '0.2,-0.05,0.12:0.2,0.05,0.12', '--steps', '20')
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'note: no publisher of /joint_states' in result.stdout
    assert 'line of 20 waypoints: success' in result.stdout


def test_a_path_with_no_server_says_so_before_waiting_for_joint_states(ros_env):
    command = [str(executable('ik_client')), '--line', '0.2,-0.05,0.12:0.2,0.05,0.12',
               '--server', '/nobody', '--timeout', '3']  # fmt: skip
    result = subprocess.run(command, env=ros_env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'error: service /nobody/solve_ik is not available' in result.stderr, result.stderr
    assert '/joint_states' not in result.stdout, result.stdout


def test_a_line_is_followed_moved_and_plotted(server, ros_env, tmp_path):
    plot = tmp_path / 'line.png'
    line = ('--line', '0.2,-0.05,0.12:0.2,0.05,0.12', '--steps', '30', '--pitch', '0.5')
    argv = (*line, '--move', '--path-time', '1.0', '--plot', str(plot), '--tighten')
    result = run_client(ros_env, *argv)
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'line of 30 waypoints: success' in result.stdout
    # SolvePath.tighten went with it: the OM-X on whole poses has no joint to spare.
    assert 'not tightened: the arm has no joints to spare' in result.stdout
    assert '30 points, largest position error' in result.stdout
    assert 'goals for /goal_joint_space_path: the first taken' in result.stdout  # one by one
    assert plot.is_file() and plot.stat().st_size > 10_000


def test_a_line_out_of_reach_exits_nonzero_with_the_waypoint(server, ros_env):
    line = ('--line', '0.2,0,0.1:0.6,0,0.1', '--steps', '20', '--alternatives', '4')
    result = run_client(ros_env, *line)
    assert result.returncode == 1
    assert 'line of 20 waypoints: FAILED: waypoint' in result.stdout
    assert 'the best of' in result.stdout  # every alternative stops too
    # With --move, refused before the arm goes to its start.
    result = run_client(ros_env, *line, '--move', '--pitch', '0.5')
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'line of 20 waypoints: FAILED (the arm not moved): waypoint' in result.stdout
    assert 'move:' not in result.stdout, result.stdout


def test_a_malformed_line_is_refused_before_any_call(ros_env):
    result = run_client(ros_env, '--line', '0.2,0,0.1:0.3')
    assert result.returncode == 2
    assert 'expected x0,y0,z0:x1,y1,z1' in result.stderr
    result = run_client(ros_env, '--line', '0.2,0,0.1:0.3,0,0.1', '--alternatives', '65')
    assert result.returncode == 2
    assert '--alternatives must be 0 to 64, got 65' in result.stderr
    result = run_client(ros_env, '--line', '0.2,0,0.1:0.3,0,0.1', '--solutions', '3')
    assert result.returncode == 2
    assert '--solutions is for a single pose (--x --y --z), not --line' in result.stderr
    result = run_client(ros_env, '--x', '0.2', '--y', '0', '--z', '0.1', '--alternatives', '2')
    assert result.returncode == 2
    assert '--alternatives is for --line or --circle' in result.stderr
    result = run_client(ros_env, '--x', '0.2', '--y', '0', '--z', '0.1', '--tighten')
    assert result.returncode == 2
    assert '--tighten is for --line or --circle' in result.stderr


def test_moving_along_a_line_of_positions_needs_an_orientation(ros_env):
    result = run_client(ros_env, '--line', '0.2,0,0.1:0.25,0,0.1', '--move')
    assert result.returncode == 2
    assert '--line --move needs --pitch or a quaternion' in result.stderr


def test_the_arm_draws_a_circle(server, ros_env, tmp_path):
    plot = tmp_path / 'circle.png'
    circle = ('--circle', '0.2,0,0.1:0.04', '--steps', '60', '--pitch', '0.8')
    result = run_client(ros_env, *circle, '--move', '--path-time', '1.0', '--plot', str(plot))
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'circle of 60 waypoints: success' in result.stdout
    assert plot.is_file()


@pytest.mark.parametrize('signal_number', [signal.SIGINT, signal.SIGTERM])
def test_a_client_ended_by_a_signal_exits_without_a_traceback(ros, ros_env, signal_number):
    # With --move (here under SIGTERM) but nothing sent yet, no line that the arm may be moving.
    move = ['--move'] if signal_number == signal.SIGTERM else []
    command = [str(executable('ik_client')), '--x', '0.2', '--y', '0', '--z', '0.1',
               '--pitch', '0.5', '--server', '/nobody', '--timeout', '60', *move]  # fmt: skip
    process = subprocess.Popen(
        command, env=ros_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        watcher = ros.node('client_watcher')
        started = ros.spin_until(lambda: 'ik_client' in watcher.get_node_names(), 60.0)
        assert started, 'ik_client never joined the graph'
        process.send_signal(signal_number)  # it waits for /nobody/solve_ik meanwhile
        _, errors = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + signal_number and 'Traceback' not in errors, errors
    assert 'stop holds it' not in errors, errors


def test_a_client_interrupted_once_a_move_was_sent_says_the_arm_may_be_moving(capsys):
    from iknet_ros.ik_client import interrupted, parse_args

    args = parse_args(['--x', '0.2', '--y', '0', '--z', '0.1', '--pitch', '0.5', '--move'])
    assert interrupted(args, signal.SIGINT) == 130 and capsys.readouterr().err == ''
    args.moves_sent.append('goal_task_space_path')
    assert interrupted(args, signal.SIGINT) == 130
    assert 'the arm may still be moving: /ik_server/stop holds it' in capsys.readouterr().err


def test_a_gripper_state_taken_as_the_seed_is_dropped_and_asked_again(processes, ros, ros_env):
    # A gripper's driver alone on /joint_states: the first message the client takes as the
    # line's seed lacks the arm's joints, the server refuses that seed, and the client must ask
    # again without one instead of failing.
    from sensor_msgs.msg import JointState

    processes.start(executable('ik_server'), '--ros-args', '-p', 'device:=cpu')
    node = ros.node('gripper_driver')
    publisher = node.create_publisher(JointState, '/joint_states', 10)
    gripper = JointState(name=['gripper'], position=[0.01])
    node.create_timer(0.05, lambda: publisher.publish(gripper))
    command = [str(executable('ik_client')), '--line', '0.2,-0.05,0.12:0.2,0.05,0.12',
               '--steps', '10', '--pitch', '0.5', '--timeout', '60']  # fmt: skip
    process = subprocess.Popen(
        command, env=ros_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        ended = ros.spin_until(lambda: process.poll() is not None, 120.0)
        output, errors = process.communicate(timeout=None if ended else 1)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert ended, 'ik_client did not end within 120 s'
    assert process.returncode == 0, output + errors
    assert 'line of 10 waypoints: success' in output
    assert "note: /joint_states did not name all of the arm's joints ['joint1'," in output


def test_a_path_replacing_the_move_to_its_start_is_no_warning(processes, ros_env, tmp_path):
    # On the trajectory interface the path's goal replaces the move to its first waypoint while
    # that settles: the controller aborts the older goal, which the server logs as information.
    from recording_helpers import wait_for

    log = tmp_path / 'server.log'
    processes.start(executable('omx_sim'), log=tmp_path / 'sim.log')
    processes.start(
        executable('ik_server'), '--ros-args', '-p', 'device:=cpu',
        # Discovering the simulator's action may take seconds on a busy machine.
        '-p', 'command_interface:=trajectory', '-p', 'command_timeout:=30.0', log=log,
    )  # fmt: skip
    line = ('--line', '0.2,-0.05,0.12:0.2,0.05,0.12', '--steps', '30', '--pitch', '0.5')
    result = run_client(ros_env, *line, '--move', '--path-time', '1.0')
    assert result.returncode == 0, result.stdout + result.stderr
    # Two results: the move's (replaced, or done where it ended before the path came) and the
    # path's.

    def results() -> int:
        text = log.read_text()
        return text.count('a newer goal was sent') + text.count('trajectory done')

    wait_for(lambda: results() >= 2, 30.0, f"both trajectories' results in {log}")
    assert 'WARN' not in log.read_text(), log.read_text()


def test_the_shipped_panda_model_serves_many_solutions_of_one_pose(
    panda_model_path, processes, ros_env, tmp_path
):
    """The README's Panda call: ik_server on models/panda_mixture.pt (its chain from the model,
    network+refine by default), asked by ik_client for 200 solutions of one pose."""
    log = tmp_path / 'server.log'
    processes.start(executable('ik_server'), '--ros-args', '-p', f'model_path:={panda_model_path}',
                    '-p', 'command_interface:=none', '-p', 'device:=cpu', log=log)  # fmt: skip
    result = run_client(ros_env, '--x', '0.6296', '--y', '-0.0278', '--z', '0.4853',
                        '--qx', '-0.9896', '--qy', '-0.0809', '--qz', '0.0813', '--qw', '0.0867',
                        '--frame', 'panda_link0', '--solutions', '200')  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr + log.read_text()
    solutions = re.findall(r'#\d+ panda_joint1=.*\| position error (\S+) mm', result.stdout)
    assert len(solutions) >= 150, result.stdout
    assert max(float(error) for error in solutions) <= 0.01
    assert 'outside software limits' not in result.stdout


def test_the_network_solver_is_asked_unrefined_unless_refine_is_given():
    from iknet_ros.ik_client import parse_args

    pose = ['--x', '0.2', '--y', '0', '--z', '0.1']
    assert parse_args([*pose, '--solver', 'network']).refine is False
    assert parse_args([*pose, '--solver', 'network', '--refine']).refine is True
    assert parse_args(pose).refine is True
    assert parse_args([*pose, '--no-refine']).refine is False
    # The other solvers answer as they are: --no-refine would change nothing, so it is refused.
    for solver in ('network+refine', 'refine-from-zero', 'analytic'):
        with pytest.raises(SystemExit):
            parse_args([*pose, '--solver', solver, '--no-refine'])
