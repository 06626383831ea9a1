"""Turns: the server's path and move requests one at a time, in the order they were taken."""

from rclpy.task import Future

from iknet_ros.request_turns import Turns


def test_requests_take_turns_in_order_and_a_failed_one_hands_its_turn_on(ros):
    turns, order = Turns(), []
    releases = [Future() for _ in range(3)]

    async def request(index: int) -> None:
        try:
            async with turns:
                order.append(f'start {index}')
                await releases[index]
                if index == 1:
                    raise ValueError('a request that fails inside its turn')
                order.append(f'end {index}')
        except ValueError:  # as the server's callbacks answer one
            order.append(f'failed {index}')

    tasks = [ros.executor.create_task(request, index) for index in range(3)]
    # The one in its turn and the two waiting.
    assert ros.spin_until(lambda: turns.ahead() == 3, 5.0), turns.ahead()
    assert order == ['start 0']
    releases[2].set_result(None)  # the last one's release comes first: it still waits its turn
    releases[0].set_result(None)
    assert ros.spin_until(lambda: order == ['start 0', 'end 0', 'start 1'], 5.0), order
    releases[1].set_result(None)
    assert ros.spin_until(lambda: all(task.done() for task in tasks), 5.0), order
    assert order == ['start 0', 'end 0', 'start 1', 'failed 1', 'start 2', 'end 2']
    assert turns.ahead() == 0
