"""call_with_resend over real DDS: a lost answer is made good by the resent request."""

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.task import Future
from std_srvs.srv import Trigger

from iknet_ros.service_calls import call_with_resend


def forgetful_service(ros, name: str, forget: int) -> list[int]:
    """A Trigger service that never answers its first `forget` requests; returns the call log."""
    calls: list[int] = []

    async def answer(request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        calls.append(len(calls))
        if len(calls) <= forget:
            await Future()  # never done: to the client, exactly a lost answer
        response.success = True
        response.message = f'answered call {len(calls)}'
        return response

    # Reentrant, so a forgotten request does not hold back the next one.
    ros.node(f'{name}_server').create_service(
        Trigger, name, answer, callback_group=ReentrantCallbackGroup()
    )
    return calls


def test_the_answer_to_a_resent_request_is_returned(ros):
    calls = forgetful_service(ros, 'forget_first', forget=1)
    client = ros.node('caller').create_client(Trigger, 'forget_first')
    answer = call_with_resend(ros.executor, client, Trigger.Request(), 10.0, resend_after_s=0.3)
    assert answer.found and answer.resent == 1
    assert answer.response.success and answer.response.message == 'answered call 2'
    assert len(calls) == 2


def test_no_answer_at_all_gives_none_after_the_timeout(ros):
    calls = forgetful_service(ros, 'forget_all', forget=100)
    client = ros.node('caller').create_client(Trigger, 'forget_all')
    answer = call_with_resend(ros.executor, client, Trigger.Request(), 2.0, resend_after_s=0.3)
    assert answer.found and answer.response is None
    # Sent at 0, 0.3, 0.9 and 2.1 s would be past the timeout: two resends, all seen.
    assert answer.resent == 2 and len(calls) == 3


def test_a_missing_service_is_reported_as_not_found(ros):
    client = ros.node('caller').create_client(Trigger, 'nobody_serves_this')
    answer = call_with_resend(ros.executor, client, Trigger.Request(), 0.5)
    assert not answer.found and answer.response is None and answer.resent == 0


def test_a_slow_answer_is_asked_for_at_most_max_resends_times_more(ros):
    """A slow request (a long path) is not sent again and again, each copy computed in turn."""
    calls = forgetful_service(ros, 'slow', forget=100)
    client = ros.node('caller').create_client(Trigger, 'slow')
    answer = call_with_resend(
        ros.executor, client, Trigger.Request(), 2.0, resend_after_s=0.3, max_resends=1
    )
    assert answer.found and answer.response is None
    assert answer.resent == 1 and len(calls) == 2
