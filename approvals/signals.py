"""Signal receivers: a changed policy is re-read at once; a revoked token, or one whose user changed, is
verified again at once; a logout closes that session's sockets; a lockout is audited."""

from axes.signals import user_locked_out
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import m2m_changed, post_delete, post_save

from approvals.models import ApiToken, Policy
from approvals.team import accounts, lockout, policies, tokens

user_logged_out.connect(accounts.on_logged_out, dispatch_uid="approvals.close_sockets_on_logout")
user_locked_out.connect(lockout.audit_lockout, dispatch_uid="approvals.audit_lockout")

post_save.connect(policies.forget_cached_policies, sender=Policy, dispatch_uid="approvals.policy_saved")
post_delete.connect(policies.forget_cached_policies, sender=Policy, dispatch_uid="approvals.policy_deleted")
for relation in ("allowed_users", "allowed_groups", "assigned_users", "assigned_groups"):
    m2m_changed.connect(
        policies.forget_cached_policies,
        sender=getattr(Policy, relation).through,
        dispatch_uid=f"approvals.policy_{relation}_changed",
    )

post_save.connect(tokens.forget_token, sender=ApiToken, dispatch_uid="approvals.token_saved")
post_delete.connect(tokens.forget_token, sender=ApiToken, dispatch_uid="approvals.token_deleted")
post_save.connect(tokens.forget_tokens_of_user, sender=get_user_model(), dispatch_uid="approvals.token_user_saved")
post_delete.connect(tokens.forget_tokens_of_user, sender=get_user_model(), dispatch_uid="approvals.token_user_deleted")
