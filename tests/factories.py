"""factory_boy factories. Agency-owned rows are created in their agency's tenant context."""

from __future__ import annotations

from typing import Any

import factory
from factory.django import DjangoModelFactory

from core import tenancy
from core.models import Agency, Membership, Role, Site, User


class TenantFactory[T](DjangoModelFactory[T]):
    """Creates rows inside a platform context, as a service would with its own tenant set."""

    class Meta:
        abstract = True

    @classmethod
    def _create(cls, model_class: type[T], *args: Any, **kwargs: Any) -> T:
        with tenancy.platform_context():
            return super()._create(model_class, *args, **kwargs)


class AgencyFactory(TenantFactory[Agency]):
    class Meta:
        model = Agency

    name = factory.Sequence(lambda n: f"Agency {n}")
    slug = factory.Sequence(lambda n: f"agency-{n}")


class SiteFactory(TenantFactory[Site]):
    class Meta:
        model = Site

    agency = factory.SubFactory(AgencyFactory)
    name = factory.Sequence(lambda n: f"Site {n}")
    domain = factory.Sequence(lambda n: f"site{n}.example.com")


class UserFactory(DjangoModelFactory[User]):
    class Meta:
        model = User
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda o: f"{o.username}@example.com")
    is_staff = True
    password = factory.django.Password("pw-for-tests")


class MembershipFactory(TenantFactory[Membership]):
    class Meta:
        model = Membership

    agency = factory.SubFactory(AgencyFactory)
    user = factory.SubFactory(UserFactory)
    role = Role.STAFF
