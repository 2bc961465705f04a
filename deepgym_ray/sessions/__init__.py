"""Multi-turn agent episodes: a :class:`Session` in one sandbox (and :class:`AsyncSession`,
:func:`run_episode`), the public shapes (:class:`Action`, :class:`Observation`,
:class:`Trajectory`) and the reward contract's rule for a failure once the agent has acted
(:func:`failure_result`, with :func:`agent_exhausted` for the half-time rule).

Example:
    >>> from deepgym_ray.sessions import Action, failure_result
    >>> Action(action_type="bash", content="pytest -q").action_type
    'bash'
"""

from deepgym_ray.exceptions import is_infrastructure_failure
from deepgym_ray.sessions.rules import EPISODES, agent_exhausted, failure_result
from deepgym_ray.sessions.session import AsyncSession, Session, SessionStateError, run_episode
from deepgym_ray.sessions.shapes import (
    ACTION_TYPES,
    Action,
    Observation,
    Trajectory,
    TrajectoryStep,
)

__all__ = ["ACTION_TYPES", "EPISODES", "Action", "AsyncSession", "Observation", "Session",
           "SessionStateError", "Trajectory", "TrajectoryStep", "agent_exhausted",
           "failure_result", "is_infrastructure_failure", "run_episode"]
